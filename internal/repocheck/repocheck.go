// Package repocheck keeps the repository a repository of source: no tracked
// file is larger than MaxSize, none is an executable or other binary unless
// it is a known asset, and the binary `go build` makes of every command in
// cmd/ and hack/ is ignored by git (its tests run the checks on this
// repository).
package repocheck

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
)

// MaxSize is the largest tracked file allowed, 1 MiB.
const MaxSize = 1 << 20

// Problem is a tracked file the check refuses.
type Problem struct {
	Path   string // slash-separated, relative to the repository root
	Size   int64
	Reason string
}

func (p Problem) String() string {
	return fmt.Sprintf("%s, %s: %s", p.Path, sizeText(p.Size), p.Reason)
}

// Check lists the files git tracks under root (git ls-files) and returns the
// ones over MaxSize, the executables (ELF, Mach-O, PE), and the files with a
// NUL byte whose path matches none of the path.Match patterns in assets.
// Tracked paths missing from the work tree, symlinks and submodules are
// skipped: there is no file content to judge.
func Check(root string, assets []string) ([]Problem, error) {
	files, err := trackedFiles(root)
	if err != nil {
		return nil, err
	}
	var problems []Problem
	for _, name := range files {
		p, err := checkFile(root, name, assets)
		if err != nil {
			return nil, err
		}
		problems = append(problems, p...)
	}
	return problems, nil
}

var packageMain = regexp.MustCompile(`(?m)^package main\b`)

// UnignoredCommands returns the names of the commands (package main) in cmd/
// and hack/ whose binary, as `go build ./cmd/<name>` leaves it in root, git
// would not ignore.
func UnignoredCommands(root string) ([]string, error) {
	files, err := trackedFiles(root)
	if err != nil {
		return nil, err
	}
	commands := map[string]bool{}
	for _, f := range files {
		if !strings.HasPrefix(f, "cmd/") && !strings.HasPrefix(f, "hack/") ||
			!strings.HasSuffix(f, ".go") || strings.HasSuffix(f, "_test.go") {
			continue
		}
		data, err := os.ReadFile(filepath.Join(root, filepath.FromSlash(f)))
		if err != nil {
			if errors.Is(err, os.ErrNotExist) {
				continue
			}
			return nil, err
		}
		if packageMain.Match(data) {
			commands[path.Base(path.Dir(f))] = true
		}
	}
	names := make([]string, 0, len(commands))
	for name := range commands {
		names = append(names, name)
	}
	// Prints the ignored ones; exits 1 when none is.
	cmd := exec.Command("git", "check-ignore", "--stdin")
	cmd.Dir = root
	cmd.Stdin = strings.NewReader(strings.Join(names, "\n") + "\n")
	out, err := cmd.Output()
	var exit *exec.ExitError
	if err != nil && (!errors.As(err, &exit) || exit.ExitCode() != 1) {
		return nil, fmt.Errorf("git check-ignore in %s: %w", root, err)
	}
	for _, name := range strings.Fields(string(out)) {
		delete(commands, name)
	}
	var unignored []string
	for name := range commands {
		unignored = append(unignored, name)
	}
	sort.Strings(unignored)
	return unignored, nil
}

func trackedFiles(root string) ([]string, error) {
	if _, err := exec.LookPath("git"); err != nil {
		return nil, errors.New("git is not on PATH: the check lists the tracked files with `git ls-files`; install git")
	}
	out, err := output(root, "git", "ls-files", "-z")
	if err != nil {
		return nil, err
	}
	var files []string
	for _, f := range strings.Split(string(out), "\x00") {
		if f != "" {
			files = append(files, f)
		}
	}
	return files, nil
}

func checkFile(root, name string, assets []string) ([]Problem, error) {
	fi, err := os.Lstat(filepath.Join(root, filepath.FromSlash(name)))
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, nil
	}
	var problems []Problem
	size := fi.Size()
	if size > MaxSize {
		problems = append(problems, Problem{name, size, "larger than 1 MiB; build outputs belong in .gitignore, large data outside the repository"})
	}
	f, err := os.Open(filepath.Join(root, filepath.FromSlash(name)))
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	// Up to MaxSize is read whole, so a NUL anywhere in an allowed-size file counts.
	head, err := io.ReadAll(io.LimitReader(f, MaxSize))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	if kind := executable(head); kind != "" {
		return append(problems, Problem{name, size, "an executable (" + kind + "); build outputs belong in .gitignore"}), nil
	}
	if bytes.IndexByte(head, 0) >= 0 && !matchesAny(name, assets) {
		problems = append(problems, Problem{name, size, "binary (has NUL bytes) and not an allowed asset (repocheck's binaryAssets)"})
	}
	return problems, nil
}

// executable names the executable format b starts with, or is empty.
func executable(b []byte) string {
	if len(b) < 4 {
		return ""
	}
	switch m := binary.BigEndian.Uint32(b); {
	case m == 0x7f454c46:
		return "ELF"
	case m == 0xfeedface || m == 0xfeedfacf || m == 0xcefaedfe || m == 0xcffaedfe:
		return "Mach-O"
	case m == 0xcafebabe && len(b) >= 8 && binary.BigEndian.Uint32(b[4:]) < 45:
		// A universal Mach-O counts its architectures here; a Java class
		// file, with the same magic, has its version (45 or more).
		return "Mach-O universal"
	}
	// PE: "MZ", and the "PE\0\0" signature where the DOS header points, so a
	// text file that starts with "MZ" is not taken for one.
	if len(b) >= 0x40 && b[0] == 'M' && b[1] == 'Z' {
		off := int(binary.LittleEndian.Uint32(b[0x3c:]))
		if off >= 0x40 && off+4 <= len(b) && string(b[off:off+4]) == "PE\x00\x00" {
			return "PE"
		}
	}
	return ""
}

func matchesAny(name string, patterns []string) bool {
	for _, p := range patterns {
		if ok, _ := path.Match(p, name); ok {
			return true
		}
	}
	return false
}

// sizeText is n in bytes, and in KiB or MiB where that reads better.
func sizeText(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%d bytes (%.1f MiB)", n, float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%d bytes (%.1f KiB)", n, float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d bytes", n)
}

// output runs name with args in dir and returns its standard output; an
// error names the command, the directory and what it said on stderr.
func output(dir, name string, args ...string) ([]byte, error) {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("%s %s in %s: %v: %s", name, strings.Join(args, " "), dir, err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
