package repocheck

import (
	"bytes"
	"encoding/binary"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// binaryAssets are the path.Match patterns of tracked files allowed to hold
// NUL bytes. The repository tracks none today; a test image would be added
// here by path, e.g. "internal/qr/testdata/*.png".
var binaryAssets []string

// root is the repository's top directory.
const root = "../.."

func TestTrackedFiles(t *testing.T) {
	problems, err := Check(root, binaryAssets)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range problems {
		t.Errorf("tracked file %s", p)
	}
	if len(problems) > 0 {
		t.Log("remove them with `git rm --cached <file>` (and ignore build outputs in .gitignore); see docs/development.md")
	}
}

func TestCommandsIgnored(t *testing.T) {
	names, err := UnignoredCommands(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		t.Errorf("`go build` of the command %s leaves a binary %s in the root that git does not ignore: add /%s to .gitignore", name, name, name)
	}
}

// The check itself, on a repository of its own: a big file, executables and
// a file with NUL bytes are reported; text, an allowed asset, a Java class
// file, an untracked binary and a tracked file deleted from the tree are not.
func TestCheckReports(t *testing.T) {
	dir := t.TempDir()
	git := func(args ...string) {
		t.Helper()
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	write := func(name string, data []byte) {
		t.Helper()
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	pe := make([]byte, 0x80)
	copy(pe, "MZ")
	binary.LittleEndian.PutUint32(pe[0x3c:], 0x40)
	copy(pe[0x40:], "PE\x00\x00")

	write("big.txt", bytes.Repeat([]byte("a"), MaxSize+1))
	write("limit.txt", bytes.Repeat([]byte("a"), MaxSize))
	write("tool", append([]byte("\x7fELF"), make([]byte, 100)...))
	write("tool-mac", []byte{0xcf, 0xfa, 0xed, 0xfe, 7, 0, 0, 1})
	write("tool.exe", pe)
	write("data.bin", []byte("abc\x00def"))
	write("testdata/logo.png", []byte("\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR"))
	write("Class.class", []byte{0xca, 0xfe, 0xba, 0xbe, 0, 0, 0, 52})
	write("notes.md", []byte("MZ is how a DOS executable starts\n"))
	write("gone.bin", []byte("\x00"))
	git("init", "-q")
	git("add", ".")
	if err := os.Remove(filepath.Join(dir, "gone.bin")); err != nil {
		t.Fatal(err)
	}
	write("untracked", []byte("\x7fELF\x00"))

	problems, err := Check(dir, []string{"testdata/*.png", "*.class"})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, p := range problems {
		got[p.Path] += p.String() + "\n"
	}
	want := map[string]string{
		"big.txt":  "big.txt, 1048577 bytes (1.0 MiB): larger than 1 MiB",
		"tool":     "tool, 104 bytes: an executable (ELF)",
		"tool-mac": "an executable (Mach-O)",
		"tool.exe": "an executable (PE)",
		"data.bin": "data.bin, 7 bytes: binary (has NUL bytes)",
	}
	for name, text := range want {
		if !strings.Contains(got[name], text) {
			t.Errorf("%s: reported %q, want it to contain %q", name, got[name], text)
		}
	}
	for name, text := range got {
		if _, ok := want[name]; !ok {
			t.Errorf("%s reported, want not: %s", name, text)
		}
	}
}

func TestUnignoredCommands(t *testing.T) {
	dir := t.TempDir()
	for name, text := range map[string]string{
		".gitignore":           "/ignored\n",
		"cmd/ignored/main.go":  "package main\n",
		"hack/tool/main.go":    "// Command tool.\npackage main\n",
		"hack/lib/lib.go":      "package lib\n",
		"hack/lib/lib_test.go": "package main\n",
		"internal/x/main.go":   "package main\n",
	} {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "."}} {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
	}
	got, err := UnignoredCommands(dir)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(got, " ") != "tool" {
		t.Errorf("UnignoredCommands = %q, want [tool]", got)
	}
}

func TestCheckNotARepository(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("GIT_CEILING_DIRECTORIES", filepath.Dir(dir)) // not a repository above it either
	_, err := Check(dir, nil)
	if err == nil || !strings.Contains(err.Error(), "git ls-files") {
		t.Errorf("Check outside a repository: err = %v, want one naming git ls-files", err)
	}
}

// The tools module compiles the libraries linkforge compiles at linkforge's
// versions, so a cold build compiles them once (the Makefile says why).
func TestToolsShareTheProjectsVersions(t *testing.T) {
	skews, err := ToolsSkew(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range skews {
		t.Errorf("compiled at two versions: %s", s)
	}
	if len(skews) > 0 {
		t.Log("make tools-align raises the older of each pair to the newer, in go.mod or hack/tools/go.mod")
	}
}

// The check itself, on modules of its own: a library both compile at two
// versions is reported, one they compile at the same version is not.
func TestToolsSkewReports(t *testing.T) {
	dir := skewFixture(t)
	skews, err := ToolsSkew(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := []Skew{{Module: "example.com/skewed", Project: "v1.0.0", Tools: "v1.1.0"}}
	if len(skews) != 1 || skews[0] != want[0] {
		t.Fatalf("ToolsSkew = %v, want %v", skews, want)
	}
}

// Traefik and cert-manager compile the libraries they share with linkforge
// at linkforge's versions where they build with them (hack/gateway/README.md
// says what that saves a cold make test), and every exception is written
// down with its reason.
func TestGatewaySharesTheProjectsVersions(t *testing.T) {
	lags, stale, err := GatewaySkew(root)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lags {
		t.Errorf("older in hack/gateway: %s", l)
	}
	for _, prefix := range stale {
		t.Errorf("hack/gateway/held-back.txt holds %s back, but hack/gateway requires none of it at an older version than linkforge: remove the line", prefix)
	}
	if len(lags) > 0 {
		t.Log("make tools-align raises them in hack/gateway/go.mod; a module Traefik or cert-manager does not build with goes in hack/gateway/held-back.txt, with the reason")
	}
}

// The gateway check itself: an older version is reported, a newer or the
// same one is not, a held-back one is not, and a prefix that holds nothing
// back is stale.
func TestGatewaySkewReports(t *testing.T) {
	dir := skewFixture(t)
	write(t, dir, "hack/gateway/go.mod", `module example.com/gateway

go 1.24

require (
	example.com/skewed v1.0.0
	example.com/same v1.2.0
	example.com/held v0.1.0
	example.com/elsewhere v0.1.0
)
`)
	write(t, dir, "hack/gateway/held-back.txt", "# why\nexample.com/held\tits reason\n\nexample.com/gone\tno longer\n")
	lags, stale, err := GatewaySkew(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := GatewayLag{Module: "example.com/skewed", Gateway: "v1.0.0", Newest: "v1.1.0", Where: "hack/tools/go.mod"}
	if len(lags) != 1 || lags[0] != want {
		t.Errorf("GatewaySkew lags = %v, want [%v]", lags, want)
	}
	if len(stale) != 1 || stale[0] != "example.com/gone" {
		t.Errorf("GatewaySkew stale = %q, want [example.com/gone]", stale)
	}
}

// skewFixture writes a project, its tools module and their libraries into
// a new directory: both compile example.com/same at v1.0.0 and
// example.com/skewed at two versions (v1.0.0 in the project, v1.1.0 in the
// tools); the project also compiles example.com/held v0.2.0.
func skewFixture(t *testing.T) string {
	dir := t.TempDir()
	for _, lib := range []string{"skewed@v1.0.0", "skewed@v1.1.0", "same@v1.0.0", "held@v0.2.0"} {
		name, _, _ := strings.Cut(lib, "@")
		write(t, dir, "libs/"+lib+"/go.mod", "module example.com/"+name+"\n\ngo 1.22\n")
		write(t, dir, "libs/"+lib+"/lib.go", "package "+name+"\n")
	}
	write(t, dir, "go.mod", `module example.com/project

go 1.22

require (
	example.com/skewed v1.0.0
	example.com/same v1.0.0
	example.com/held v0.2.0
)

replace (
	example.com/skewed => ./libs/skewed@v1.0.0
	example.com/same => ./libs/same@v1.0.0
	example.com/held => ./libs/held@v0.2.0
)
`)
	write(t, dir, "main.go", "package main\n\nimport (\n\t_ \"example.com/held\"\n\t_ \"example.com/same\"\n\t_ \"example.com/skewed\"\n)\n\nfunc main() {}\n")
	write(t, dir, "hack/tools/go.mod", `module example.com/tools

go 1.24

tool example.com/tools/lint

require (
	example.com/skewed v1.1.0
	example.com/same v1.0.0
)

replace (
	example.com/skewed => ../../libs/skewed@v1.1.0
	example.com/same => ../../libs/same@v1.0.0
)
`)
	write(t, dir, "hack/tools/lint/main.go", "package main\n\nimport _ \"example.com/skewed\"\n\nfunc main() {}\n")
	write(t, dir, "hack/tools/otelcol/main.go", "package main\n\nimport _ \"example.com/same\"\n\nfunc main() {}\n")
	t.Setenv("GOFLAGS", "-mod=mod")
	t.Setenv("GOWORK", "off")
	return dir
}

// write writes text into dir/name, making its directories.
func write(t *testing.T, dir, name, text string) {
	t.Helper()
	p := filepath.Join(dir, filepath.FromSlash(name))
	if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}
