#!/usr/bin/env bash
# Release every module of go.work under one version, without pushing.
#
#   scripts/release.sh vX.Y.Z            # or: make release VERSION=vX.Y.Z
#   DRY_RUN=1 scripts/release.sh vX.Y.Z  # print the steps, change nothing
#   PROXY_DIR=DIR scripts/release.sh …    # where step 5 writes (default bin/proxy)
#
# Steps:
#   1. tag core at HEAD:                core/vX.Y.Z
#   2. in every other module, require the in-repo modules it uses (core,
#      fxmodule, …) at vX.Y.Z and drop their replace directives; inside the
#      repository go.work still ties the modules together
#   3. commit "release vX.Y.Z: dependents require core vX.Y.Z"
#   4. tag every other module at that commit: <module dir>/vX.Y.Z
#      (adapters/gorm/vX.Y.Z, fxmodule/vX.Y.Z, …: the tag prefix of a module
#      in a subdirectory is the subdirectory, as the go command expects)
#   5. write every tagged module into the module proxy directory PROXY_DIR
#      (<module>/@v/list, .info, .mod, .zip; scripts/modproxy), which
#      another repository reads with GOPROXY=file://DIR before anything is
#      pushed (see "Using the modules from another repository" in README.md;
#      `make release-check` does it with a throwaway clone)
#   6. print the `git push` command to run; nothing is pushed.
#
# From the release commit on, the go command resolves the required
# …/core@vX.Y.Z (and …/fxmodule@vX.Y.Z) go.mod files through the module proxy,
# even with go.work: builds in this checkout need the tags pushed first. The
# first build after that records their checksums in go.work.sum, and
# `make tidy` those of each module's go.sum; commit both.
set -euo pipefail

GO=${GO:-go}
DRY_RUN=${DRY_RUN:-}
PROXY_DIR=${PROXY_DIR:-}
case "$DRY_RUN" in 0 | false | no) DRY_RUN= ;; esac

die() { echo "release: $*" >&2; exit 1; }

[ $# -eq 1 ] || die "usage: $0 vX.Y.Z (DRY_RUN=1 to only print the steps)"
VERSION=$1
[[ "$VERSION" =~ ^v[0-9]+\.[0-9]+\.[0-9]+(-[0-9A-Za-z.-]+)?$ ]] ||
	die "VERSION must look like v1.2.3 or v1.2.3-rc.1, got '$VERSION'"

# A relative PROXY_DIR is taken from where the script was started.
case "$PROXY_DIR" in
'' | /*) ;;
*) PROXY_DIR=$(pwd)/$PROXY_DIR ;;
esac
cd "$(git -C "$(dirname "$0")" rev-parse --show-toplevel)"
[ -f go.work ] || die "no go.work in $(pwd)"
top=$(pwd)
[ -n "$PROXY_DIR" ] || PROXY_DIR=$top/bin/proxy

# Problems that make the real run refuse. A dry run reports them and goes on
# showing the steps, then exits non-zero.
problems=0
refuse() {
	if [ -n "$DRY_RUN" ]; then
		echo "release: the real run would refuse: $*" >&2
		problems=$((problems + 1))
	else
		die "$*"
	fi
}

# quote ARG…: the arguments as shell words, quoted where they need it.
quote() {
	local a out=() sq="'"
	for a in "$@"; do
		if [[ "$a" =~ ^[A-Za-z0-9_./@=:,+-]+$ ]]; then
			out+=("$a")
		else
			out+=("'${a//$sq/$sq\\$sq$sq}'")
		fi
	done
	echo "${out[*]}"
}

# run CMD…: print it; execute it unless DRY_RUN.
run() {
	echo "+ $(quote "$@")"
	[ -n "$DRY_RUN" ] || "$@"
}

if [ -n "$(git status --porcelain)" ]; then
	refuse "the working tree is not clean (git status --porcelain):
$(git status --porcelain | head -n 20)"
fi

# Modules, in go.work order: directory (relative, no ./) and module path.
dirs=()
paths=()
while IFS= read -r d; do
	d=${d#./}
	d=${d%/}
	[ -f "$d/go.mod" ] || die "go.work uses $d, which has no go.mod"
	p=$("$GO" mod edit -json "$d/go.mod" | sed -n 's/^[[:space:]]*"Path": "\(.*\)",\{0,1\}$/\1/p' | head -n 1)
	[ -n "$p" ] || die "cannot read the module path of $d/go.mod"
	dirs+=("$d")
	paths+=("$p")
done < <("$GO" work edit -json go.work | sed -n 's/^[[:space:]]*"DiskPath": "\(.*\)",\{0,1\}$/\1/p')

core_i=-1
for i in "${!dirs[@]}"; do
	[ "${dirs[$i]}" = core ] && core_i=$i
done
[ "$core_i" -ge 0 ] || die "go.work does not use ./core"

# The go command finds module M/<dir> at tag <dir>/vX.Y.Z of the repository
# whose root module path is M; and from v2 on the path must end in /vN.
root=${paths[$core_i]%/core}
major=${VERSION#v}
major=${major%%.*}
for i in "${!dirs[@]}"; do
	d=${dirs[$i]} p=${paths[$i]}
	want=$root/$d
	if [ "$major" -ge 2 ]; then want=$want/v$major; fi
	[ "$p" = "$want" ] || refuse "$d/go.mod declares module $p; tag $d/$VERSION needs module $want"
done

tags=()
for d in "${dirs[@]}"; do
	t=$d/$VERSION
	git rev-parse -q --verify "refs/tags/$t" >/dev/null && refuse "tag $t exists already"
	tags+=("$t")
done

if [ -f CHANGELOG.md ] && ! grep -Eq "^## \[v?${VERSION#v}\]" CHANGELOG.md; then
	echo "release: note: CHANGELOG.md has no '## [${VERSION#v}]' section yet" >&2
fi

[ -n "$DRY_RUN" ] && echo "release: dry run, nothing is changed"

# 1. core first: the other modules will require exactly this commit.
run git tag -a "core/$VERSION" -m "core $VERSION"

# 2. dependents: require the in-repo modules at VERSION, no replace.
changed=()
for i in "${!dirs[@]}"; do
	[ "$i" = "$core_i" ] && continue
	d=${dirs[$i]}
	json=$("$GO" mod edit -json "$d/go.mod")
	args=()
	for p in "${paths[@]}"; do
		# Requires and replaces of the in-repo module p (old paths of a replace
		# are printed as "Old": {"Path": …}, so match the Path line in each).
		if grep -Fq "\"Path\": \"$p\"" <<<"$(sed -n '/"Require"/,/^[[:space:]]*\]/p' <<<"$json")"; then
			args+=("-require=$p@$VERSION")
		fi
		if grep -Fq "\"Path\": \"$p\"" <<<"$(sed -n '/"Replace"/,/^[[:space:]]*\]/p' <<<"$json")"; then
			args+=("-dropreplace=$p")
		fi
	done
	[ ${#args[@]} -gt 0 ] || continue
	echo "+ (cd $(quote "$d") && $(quote "$GO" mod edit "${args[@]}"))"
	[ -n "$DRY_RUN" ] || (cd "$d" && "$GO" mod edit "${args[@]}")
	changed+=("$d/go.mod")
done

# 3. one commit with every go.mod change (none when they already match).
msg="release $VERSION: dependents require core $VERSION"
if [ ${#changed[@]} -gt 0 ]; then
	run git add -- "${changed[@]}"
	if [ -n "$DRY_RUN" ] || ! git diff --cached --quiet; then
		run git commit -q -m "$msg"
	else
		echo "release: the go.mod files already require $VERSION; no commit"
	fi
fi

# 4. every other module at the release commit.
for i in "${!dirs[@]}"; do
	[ "$i" = "$core_i" ] && continue
	run git tag -a "${dirs[$i]}/$VERSION" -m "${dirs[$i]} $VERSION"
done

# 5. the tagged modules as a module proxy directory.
mods=()
for i in "${!dirs[@]}"; do
	mods+=("${paths[$i]}=${dirs[$i]}")
done
echo "+ (cd scripts/modproxy && $(quote GOWORK=off "$GO" run . -repo "$top" -out "$PROXY_DIR" -version "$VERSION") <module>=<dir>…)"
if [ -z "$DRY_RUN" ]; then
	(cd scripts/modproxy && GOWORK=off "$GO" run . -repo "$top" -out "$PROXY_DIR" -version "$VERSION" "${mods[@]}") >/dev/null
	echo "release: wrote ${#mods[@]} modules at $VERSION into $PROXY_DIR"
fi

# 6. nothing is pushed.
branch=$(git symbolic-ref -q --short HEAD || true)
echo
if [ -n "$DRY_RUN" ]; then
	echo "release: dry run done; the real run would end by printing:"
else
	echo "release: tagged $VERSION on ${#tags[@]} modules; nothing was pushed. To publish:"
fi
echo "  git push --atomic origin ${branch:+$branch }${tags[*]}"
echo "Builds here resolve the new requires through the module proxy once the tags are"
echo "pushed; then \`make tidy\` and commit the go.sum and go.work.sum lines they add."
echo "Before that, another module can use the release from the proxy directory:"
echo "  GOPROXY=file://$PROXY_DIR,https://proxy.golang.org GONOSUMDB=${root}/* go get ${root}/adapters/gorm@$VERSION"

if [ "$problems" -gt 0 ]; then
	echo "release: $problems problem(s) above; the real run would refuse" >&2
	exit 1
fi
