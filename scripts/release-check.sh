#!/usr/bin/env bash
# Check that another repository can consume a release (make release-check).
#
#   scripts/release-check.sh [vX.Y.Z]   # default v0.0.0-ci.g<commit>
#
# 1. clone HEAD into a temporary directory and run scripts/release.sh there,
#    so the tags and the release commit die with the clone; its proxy
#    directory (PROXY_DIR) holds every module at that version;
# 2. in a fresh module outside the repository (GOWORK=off), `go get`
#    …/adapters/gorm and …/fxmodule at that version from the proxy
#    directory (third-party modules come from the local module cache, then
#    from GOPROXY), then `go mod tidy` and `go mod verify`;
# 3. run the README's GORM quick start on SQLite and the fx module's start
#    (scripts/release-check/main.go, fx.go); each must print the event it
#    delivered.
#
# Only committed work is checked: the clone is of HEAD. Our modules are not
# in the public checksum database, so GONOSUMDB names them. The module cache
# is the usual one (its third-party modules, and the build cache of their
# packages, are reused); this version of our modules is removed from it
# before and after, so that a version made from another HEAD never comes
# from the cache. The build settings are the usual ones, so the packages
# `make demo` compiled (modernc.org/sqlite the largest) come from the build
# cache.
set -euo pipefail

GO=${GO:-go}
top=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
# A version of its own per commit: go trusts what its caches hold of a
# version (the module cache, and the index of a module's files in the build
# cache), so one version name reused for other contents builds stale files.
VERSION=${1:-v0.0.0-ci.g$(git -C "$top" rev-parse --short=12 HEAD)}
root=github.com/go-outbox/outbox
start=$SECONDS

modcache=$("$GO" env GOMODCACHE)
# forget removes this version of our modules from the module cache.
forget() {
	local d
	for d in "$modcache/$root"/*@"$VERSION" "$modcache/$root"/*/*@"$VERSION" \
		"$modcache/cache/download/$root"/*/@v/"$VERSION".* "$modcache/cache/download/$root"/*/*/@v/"$VERSION".*; do
		[ -e "$d" ] || continue
		chmod -R u+w "$d" && rm -rf "$d"
	done
	# Version lists that name this version only, then what is left empty.
	for d in "$modcache/cache/download/$root"/*/@v/list "$modcache/cache/download/$root"/*/*/@v/list; do
		[ "$(cat "$d" 2>/dev/null)" = "$VERSION" ] && rm -f "$d"
	done
	for d in "$modcache/$root" "$modcache/cache/download/$root"; do
		[ -d "$d" ] && find "$d" -depth -type d -empty -delete
	done
	return 0
}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/outbox-release-check.XXXXXX")
trap 'forget; rm -rf "$tmp"' EXIT
forget

if [ -n "$(git -C "$top" status --porcelain)" ]; then
	echo "release-check: note: uncommitted changes are not checked (the clone is of HEAD)" >&2
fi
head=$(git -C "$top" rev-parse HEAD)
echo "==> release $VERSION of $head in a temporary clone"
git clone -q --no-checkout "$top" "$tmp/repo"
git -C "$tmp/repo" checkout -q --detach "$head"
git -C "$tmp/repo" config user.name "release-check"
git -C "$tmp/repo" config user.email "release-check@localhost"
if ! (cd "$tmp/repo" && PROXY_DIR="$tmp/proxy" GO="$GO" bash scripts/release.sh "$VERSION" >"$tmp/release.log" 2>&1); then
	cat "$tmp/release.log" >&2
	echo "release-check: scripts/release.sh failed" >&2
	exit 1
fi
grep '^release: wrote' "$tmp/release.log"

export GOWORK=off GOFLAGS=-mod=mod GOTOOLCHAIN=local
export GOPROXY="file://$tmp/proxy,$("$GO" env GOPROXY)"
export GONOSUMDB="$root/*"
export GOPRIVATE= GONOPROXY=

app=$tmp/app
mkdir -p "$app" "$tmp/t"
export TMPDIR=$tmp/t
cp "$top"/scripts/release-check/*.go "$app/"
cd "$app"
"$GO" mod init -q example.com/consumer 2>/dev/null || "$GO" mod init example.com/consumer
echo "==> go get $root/adapters/gorm@$VERSION $root/fxmodule@$VERSION"
"$GO" get "$root/adapters/gorm@$VERSION" "$root/fxmodule@$VERSION" 2>&1 | grep -E "go-outbox|error" || true
echo "==> go mod tidy"
"$GO" mod tidy
grep "$root/" go.mod
echo "==> go mod verify"
"$GO" mod verify
"$GO" vet ./...
echo "==> go run . (the README's GORM quick start on SQLite, then the fx start)"
out=$("$GO" run .)
echo "$out"
grep -q '^delivered OrderPlaced ' <<<"$out" || { echo "release-check: the GORM quick start delivered nothing" >&2; exit 1; }
grep -q '^delivered through fx OrderPlaced ' <<<"$out" || { echo "release-check: the fx start delivered nothing" >&2; exit 1; }
echo "release-check: ok in $((SECONDS - start))s"
