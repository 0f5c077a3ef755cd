// Command testsummary reads `go test -json` on stdin, writes each package's
// output to its own log (<dir>/<package>.log), prints a line as each package
// ends (and the output of a failed test, or the end of a failed package's log
// when no test failed), and writes a one-line-per-package summary to
// <dir>/packages.txt for hack/test.sh to print, with the timing log
// (internal/testtiming) of each failed test that kept one under its
// package's line. It exits 1 when a package or a build failed.
//
//	go test -json ./... | go run ./hack/testsummary -dir bin/test-logs/go
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/linkforge/linkforge/internal/testtiming"
)

// event is a TestEvent or a BuildEvent of `go test -json` (go help buildjson).
type event struct {
	Action      string
	Package     string
	Test        string
	Elapsed     float64
	Output      string
	FailedBuild string
	ImportPath  string
}

type pkg struct {
	name    string // the import path without the module's
	log     *os.File
	logPath string
	result  string // pass, fail, skip; empty while running
	elapsed float64
	cached  bool
	ran     bool              // a test ran (else the package has none, or no test files)
	failed  []string          // top-level tests that failed
	timings []string          // the timing logs the failed tests printed
	build   string            // the package whose build failed
	tests   map[string][]byte // output of running top-level tests, printed if they fail
	tail    []string          // the package's last lines outside any test
}

const tailLines = 30

// The actions that end a test or a package.
const (
	pass = "pass"
	fail = "fail"
	skip = "skip"
)

type summary struct {
	dir    string
	module string
	out    io.Writer
	pkgs   map[string]*pkg
	order  []*pkg
	builds map[string][]byte // build output by ImportPath
}

func main() {
	dir := flag.String("dir", "bin/test-logs/go", "directory of the logs and packages.txt, emptied first")
	flag.Parse()
	if err := os.RemoveAll(*dir); err != nil {
		fatal(err)
	}
	if err := os.MkdirAll(*dir, 0o755); err != nil {
		fatal(err)
	}
	s := &summary{dir: *dir, module: modulePath(), out: os.Stdout, pkgs: map[string]*pkg{}, builds: map[string][]byte{}}
	r := bufio.NewReader(os.Stdin)
	for {
		line, err := r.ReadBytes('\n')
		if len(line) > 0 {
			s.line(line)
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			fatal(err)
		}
	}
	failed := s.finish()
	if err := os.WriteFile(filepath.Join(*dir, "packages.txt"), []byte(s.report()), 0o644); err != nil {
		fatal(err)
	}
	if failed {
		os.Exit(1)
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "testsummary:", err)
	os.Exit(2)
}

// modulePath is the module of go.mod in the working directory, trimmed from
// package names; empty if there is none.
func modulePath() string {
	data, err := os.ReadFile("go.mod")
	if err != nil {
		return ""
	}
	for _, l := range strings.Split(string(data), "\n") {
		if m, ok := strings.CutPrefix(strings.TrimSpace(l), "module "); ok {
			return strings.Trim(strings.TrimSpace(m), `"`) + "/"
		}
	}
	return ""
}

func (s *summary) line(line []byte) {
	var e event
	if line[0] != '{' || json.Unmarshal(line, &e) != nil {
		// Not an event (the go command's own errors go to stderr): pass it on.
		_, _ = s.out.Write(line)
		return
	}
	switch {
	case e.Action == "build-output":
		s.builds[e.ImportPath] = append(s.builds[e.ImportPath], e.Output...)
		_, _ = io.WriteString(s.out, e.Output)
	case e.Action == "build-fail":
	case e.Package != "":
		s.event(s.pkg(e.Package), e)
	}
}

func (s *summary) pkg(path string) *pkg {
	if p := s.pkgs[path]; p != nil {
		return p
	}
	name := strings.TrimPrefix(path, s.module)
	if name == strings.TrimSuffix(s.module, "/") {
		name = "."
	}
	p := &pkg{name: name, logPath: filepath.Join(s.dir, filepath.FromSlash(name)+".log"), tests: map[string][]byte{}}
	if err := os.MkdirAll(filepath.Dir(p.logPath), 0o755); err != nil {
		fatal(err)
	}
	f, err := os.Create(p.logPath)
	if err != nil {
		fatal(err)
	}
	p.log = f
	s.pkgs[path] = p
	s.order = append(s.order, p)
	return p
}

func (s *summary) event(p *pkg, e event) {
	top, _, _ := strings.Cut(e.Test, "/")
	p.ran = p.ran || top != ""
	switch e.Action {
	case "output":
		_, _ = p.log.WriteString(e.Output)
		if top != "" {
			p.tests[top] = append(p.tests[top], e.Output...)
			return
		}
		if strings.Contains(e.Output, "(cached)") {
			p.cached = true
		}
		p.tail = append(p.tail, e.Output)
		if len(p.tail) > tailLines {
			p.tail = p.tail[1:]
		}
	case pass, skip, fail:
		if e.Test != "" {
			if e.Test == top {
				if e.Action == fail {
					p.failed = append(p.failed, top)
					p.timings = append(p.timings, timingLogs(p.tests[top])...)
					_, _ = s.out.Write(p.tests[top])
				}
				delete(p.tests, top)
			}
			return
		}
		p.result, p.elapsed = e.Action, e.Elapsed
		if p.build = e.FailedBuild; p.build != "" {
			out := s.builds[e.FailedBuild]
			_, _ = fmt.Fprintf(p.log, "\nbuild of %s failed:\n%s", e.FailedBuild, out)
		}
		_ = p.log.Close()
		if !p.ran && e.Action != fail {
			return
		}
		if e.Action == fail && len(p.failed) == 0 && p.build == "" {
			_, _ = fmt.Fprintf(s.out, "--- %s failed outside a test; the end of its log:\n%s", p.name, strings.Join(p.tail, ""))
		}
		_, _ = fmt.Fprintln(s.out, s.pkgLine(p))
	}
}

// finish marks packages that never ended (the go command died) as failed,
// and reports whether any package failed.
func (s *summary) finish() bool {
	failed := false
	for _, p := range s.order {
		if p.result == "" {
			p.result = fail
			_ = p.log.Close()
		}
		failed = failed || p.result == fail
	}
	return failed
}

func (s *summary) pkgLine(p *pkg) string {
	status := map[string]string{pass: "ok", fail: "FAIL", skip: "skip"}[p.result]
	took := fmt.Sprintf("%6.1fs", p.elapsed)
	if p.cached {
		took = "(cached)"
	}
	line := fmt.Sprintf("%-4s  %-32s %8s  %s", status, p.name, took, p.logPath)
	switch {
	case len(p.failed) > 0:
		line += "  failed: " + strings.Join(p.failed, " ")
	case p.build != "":
		line += "  build failed: " + strings.TrimPrefix(p.build, s.module)
	case p.result == fail:
		line += "  failed outside a test (TestMain, exit, timeout)"
	}
	return line
}

// report is the summary, to fit a screen: a line for each failed package,
// then each package that took a second or more, slowest first; one line
// naming the others that passed, one those without tests. Every
// package's log is <dir>/<package>.log.
func (s *summary) report() string {
	var b strings.Builder
	var listed []*pkg
	var quick, untested []string
	for _, p := range s.order {
		switch {
		case p.result == fail:
			listed = append(listed, p)
		case !p.ran:
			untested = append(untested, p.name)
		case p.elapsed < 1 || p.cached:
			quick = append(quick, p.name)
		default:
			listed = append(listed, p)
		}
	}
	sort.SliceStable(listed, func(i, j int) bool {
		if fi, fj := listed[i].result == fail, listed[j].result == fail; fi != fj {
			return fi
		}
		return listed[i].elapsed > listed[j].elapsed
	})
	for _, p := range listed {
		b.WriteString(s.pkgLine(p) + "\n")
		for _, l := range p.timings {
			b.WriteString("      " + strings.ReplaceAll(l, "\n", "\n      ") + "\n")
		}
	}
	if len(quick) > 0 {
		fmt.Fprintf(&b, "ok, under 1s or cached: %s\n", strings.Join(quick, " "))
	}
	if len(untested) > 0 {
		fmt.Fprintf(&b, "no tests: %s\n", strings.Join(untested, " "))
	}
	return b.String()
}

// timingLogs returns the timing logs (internal/testtiming) in a test's
// output, each a line from testtiming.Start to testtiming.End (or to the
// output's end, if cut short), without the indentation go test gave them:
// "    file.go:12: " before the first line, eight spaces before the others.
func timingLogs(out []byte) []string {
	var logs, cur []string
	indent := ""
	for _, line := range strings.Split(strings.TrimSuffix(string(out), "\n"), "\n") {
		if cur == nil {
			i := strings.Index(line, testtiming.Start)
			if i < 0 {
				continue
			}
			indent = strings.Repeat(" ", len(line)-len(strings.TrimLeft(line, " "))+4)
			cur = []string{line[i:]}
			continue
		}
		line = strings.TrimPrefix(line, indent)
		cur = append(cur, line)
		if line == testtiming.End {
			logs, cur = append(logs, strings.Join(cur, "\n")), nil
		}
	}
	if cur != nil {
		logs = append(logs, strings.Join(cur, "\n"))
	}
	return logs
}
