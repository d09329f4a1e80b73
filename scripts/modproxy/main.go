// Command modproxy writes modules of a git repository, at given tags, as a
// module proxy directory: the layout that GOPROXY=file://DIR reads
// (<module>/@v/list, <version>.info, <version>.mod, <version>.zip). It is
// run by scripts/release.sh after the tags are made:
//
//	modproxy -repo . -out DIR -version vX.Y.Z PATH=DIR ...
//
// Each PATH=DIR names a module path and its directory in the repository;
// the module's tag is DIR/vX.Y.Z. The zip is made from that tag with
// golang.org/x/mod/zip, which applies the go command's rules (no vendor
// directory, no nested module, size limits); the .mod file is the tag's
// go.mod; the .info time is the tagged commit's. A version already in a
// module's list is replaced, others are kept.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	"golang.org/x/mod/zip"
)

func main() {
	repo := flag.String("repo", ".", "the git repository")
	out := flag.String("out", "", "the proxy directory to write (created if missing)")
	version := flag.String("version", "", "the version of every module (vX.Y.Z)")
	flag.Usage = func() {
		fmt.Fprintln(flag.CommandLine.Output(), "usage: modproxy -repo DIR -out DIR -version vX.Y.Z PATH=DIR ...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if err := run(*repo, *out, *version, flag.Args()); err != nil {
		fmt.Fprintln(os.Stderr, "modproxy:", err)
		os.Exit(1)
	}
}

func run(repo, out, version string, mods []string) error {
	if out == "" || len(mods) == 0 {
		return errors.New("need -out and at least one PATH=DIR")
	}
	if !semver.IsValid(version) || semver.Build(version) != "" {
		return fmt.Errorf("version %q is not a semantic version vX.Y.Z[-pre]", version)
	}
	root, err := git(repo, "rev-parse", "--show-toplevel")
	if err != nil {
		return err
	}
	for _, arg := range mods {
		path, dir, ok := strings.Cut(arg, "=")
		if !ok || path == "" || dir == "" {
			return fmt.Errorf("argument %q is not PATH=DIR", arg)
		}
		if err := write(root, out, module.Version{Path: path, Version: version}, strings.Trim(dir, "/")); err != nil {
			return fmt.Errorf("%s@%s: %w", path, version, err)
		}
		fmt.Printf("%s@%s\n", path, version)
	}
	return nil
}

// write adds module m, the directory dir of the repository root at tag
// dir/<version>, to the proxy directory out.
func write(root, out string, m module.Version, dir string) error {
	tag := dir + "/" + m.Version
	escaped, err := module.EscapePath(m.Path)
	if err != nil {
		return err
	}
	ev, err := module.EscapeVersion(m.Version)
	if err != nil {
		return err
	}
	at := filepath.Join(out, filepath.FromSlash(escaped), "@v")
	if err := os.MkdirAll(at, 0o755); err != nil {
		return err
	}
	gomod, err := git(root, "show", tag+"^{commit}:"+dir+"/go.mod")
	if err != nil {
		return err
	}
	stamp, err := git(root, "log", "-1", "--format=%cI", tag+"^{commit}")
	if err != nil {
		return err
	}
	when, err := time.Parse(time.RFC3339, stamp)
	if err != nil {
		return fmt.Errorf("commit time of %s: %w", tag, err)
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{m.Version, when.UTC()})
	if err != nil {
		return err
	}
	var zbuf bytes.Buffer
	if err := zip.CreateFromVCS(&zbuf, m, root, tag, dir); err != nil {
		return err
	}
	files := map[string][]byte{
		ev + ".mod":  []byte(gomod + "\n"),
		ev + ".info": append(info, '\n'),
		ev + ".zip":  zbuf.Bytes(),
	}
	for name, data := range files {
		if err := os.WriteFile(filepath.Join(at, name), data, 0o644); err != nil {
			return err
		}
	}
	return addToList(filepath.Join(at, "list"), m.Version)
}

// addToList adds version to the proxy's version list file, sorted.
func addToList(file, version string) error {
	var versions []string
	data, err := os.ReadFile(file)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	for _, v := range strings.Fields(string(data)) {
		if v != version {
			versions = append(versions, v)
		}
	}
	versions = append(versions, version)
	slices.SortFunc(versions, semver.Compare)
	return os.WriteFile(file, []byte(strings.Join(versions, "\n")+"\n"), 0o644)
}

// git runs git in dir and returns its output without the final newline.
func git(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", append([]string{"-C", dir}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	b, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSuffix(string(b), "\n"), nil
}
