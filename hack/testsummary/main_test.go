package main

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/linkforge/linkforge/internal/testtiming"
)

// A stream with a passing package, a failed test, a failed build, a package
// that failed outside its tests and one without tests gives each its line,
// log and the right failure.
func TestSummary(t *testing.T) {
	const m = "example.com/m/"
	stream := strings.Join([]string{
		`{"Action":"start","Package":"example.com/m/a"}`,
		`{"Action":"run","Package":"example.com/m/a","Test":"TestOK"}`,
		`{"Action":"output","Package":"example.com/m/a","Test":"TestOK","Output":"a says hi\n"}`,
		`{"Action":"pass","Package":"example.com/m/a","Test":"TestOK","Elapsed":0.5}`,
		`{"Action":"pass","Package":"example.com/m/a","Elapsed":1.5}`,
		`{"Action":"run","Package":"example.com/m/b","Test":"TestBad"}`,
		`{"Action":"output","Package":"example.com/m/b","Test":"TestBad/sub","Output":"b_test.go:4: boom\n"}`,
		`{"Action":"fail","Package":"example.com/m/b","Test":"TestBad/sub"}`,
		`{"Action":"fail","Package":"example.com/m/b","Test":"TestBad"}`,
		`{"Action":"fail","Package":"example.com/m/b","Elapsed":2}`,
		`{"ImportPath":"example.com/m/c [example.com/m/c.test]","Action":"build-output","Output":"c_test.go:3: undefined: x\n"}`,
		`{"ImportPath":"example.com/m/c [example.com/m/c.test]","Action":"build-fail"}`,
		`{"Action":"fail","Package":"example.com/m/c","FailedBuild":"example.com/m/c [example.com/m/c.test]"}`,
		`{"Action":"output","Package":"example.com/m/e","Output":"setup failed\n"}`,
		`{"Action":"fail","Package":"example.com/m/e","Elapsed":0.1}`,
		`{"Action":"output","Package":"example.com/m/d","Output":"example.com/m/d\tcoverage: 0.0% of statements\n"}`,
		`{"Action":"pass","Package":"example.com/m/d"}`,
		`{"Action":"run","Package":"example.com/m/f","Test":"TestQuick"}`,
		`{"Action":"pass","Package":"example.com/m/f","Test":"TestQuick"}`,
		`{"Action":"pass","Package":"example.com/m/f","Elapsed":0.2}`,
		`not an event`,
	}, "\n") + "\n"

	dir := t.TempDir()
	var out strings.Builder
	s := &summary{dir: dir, module: m, out: &out, pkgs: map[string]*pkg{}, builds: map[string][]byte{}}
	for _, l := range strings.SplitAfter(stream, "\n") {
		if l != "" {
			s.line([]byte(l))
		}
	}
	if !s.finish() {
		t.Error("finish: nothing failed, want failures")
	}
	report := s.report()
	for _, want := range []string{
		"FAIL  b ", "failed: TestBad\n",
		"FAIL  c ", "build failed: c [example.com/m/c.test]\n",
		"FAIL  e ", "failed outside a test",
		"ok    a ", filepath.Join(dir, "a.log"),
		"ok, under 1s or cached: f\n",
		"no tests: d\n",
	} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	if strings.Index(report, "FAIL") > strings.Index(report, "ok    a") {
		t.Errorf("failures are not listed first:\n%s", report)
	}
	for _, want := range []string{"b_test.go:4: boom", "c_test.go:3: undefined: x", "setup failed", "not an event"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("console output lacks %q:\n%s", want, out.String())
		}
	}
	if strings.Contains(out.String(), "a says hi") {
		t.Errorf("console output has a passing test's output:\n%s", out.String())
	}
	for name, want := range map[string]string{"a.log": "a says hi", "b.log": "boom", "c.log": "undefined: x", "e.log": "setup failed"} {
		data, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil || !strings.Contains(string(data), want) {
			t.Errorf("%s: %q, %v; want it to contain %q", name, data, err, want)
		}
	}
}

// A failed test's timing log (internal/testtiming), as go test prints it,
// is copied under its package's line in the report, its own lines as they
// were; the output of a test that passed is not searched.
func TestTimingLogsOfFailedTests(t *testing.T) {
	const m = "example.com/m/"
	block := testtiming.Start + "TestE2E/sub (failed after 3.0s)\n" +
		"started 01:02:03.000, load average 9.10 8.00 7.00\n" +
		"    +1.5s  load 9.10   clicked 40 times\n" +
		"ended   01:02:06.000, load average 11.00 8.50 7.10\n" + testtiming.End
	// go test's decoration of a multi-line t.Log: the file and line before
	// the first line, eight spaces before the others.
	logged := "    testtiming.go:97: " + strings.ReplaceAll(block, "\n", "\n        ") + "\n"
	var stream []string
	output := func(pkg, test, out string) {
		for _, l := range strings.SplitAfter(out, "\n") {
			if l != "" {
				b, _ := json.Marshal(event{Action: "output", Package: m + pkg, Test: test, Output: l})
				stream = append(stream, string(b))
			}
		}
	}
	output("e2e", "TestE2E/sub", "    sub_test.go:9: boom\n"+logged+"--- FAIL: TestE2E/sub (3.00s)\n")
	stream = append(stream, `{"Action":"fail","Package":"example.com/m/e2e","Test":"TestE2E/sub"}`)
	stream = append(stream, `{"Action":"fail","Package":"example.com/m/e2e","Test":"TestE2E"}`)
	output("e2e", "TestPassing", logged)
	stream = append(stream, `{"Action":"pass","Package":"example.com/m/e2e","Test":"TestPassing"}`,
		`{"Action":"fail","Package":"example.com/m/e2e","Elapsed":4}`)

	var out strings.Builder
	s := &summary{dir: t.TempDir(), module: m, out: &out, pkgs: map[string]*pkg{}, builds: map[string][]byte{}}
	for _, l := range stream {
		s.line([]byte(l + "\n"))
	}
	s.finish()
	report := s.report()
	indented := "      " + strings.ReplaceAll(block, "\n", "\n      ") + "\n"
	if !strings.Contains(report, "failed: TestE2E\n"+indented) {
		t.Errorf("the report lacks the timing log under the package's line:\n%s\nwant:\n%s", report, indented)
	}
	if n := strings.Count(report, testtiming.Start); n != 1 {
		t.Errorf("the report has %d timing logs, want the failed test's one:\n%s", n, report)
	}
}

// timingLogs finds each log in a test's output and keeps one cut short.
func TestTimingLogs(t *testing.T) {
	out := "    a_test.go:1: unrelated\n" +
		"    testtiming.go:97: " + testtiming.Start + "TestA (failed after 1.0s)\n        started x\n        " + testtiming.End + "\n" +
		"=== NAME  TestA\n" +
		"    testtiming.go:97: " + testtiming.Start + "TestB (failed after 2.0s)\n        started y\n"
	got := timingLogs([]byte(out))
	want := []string{
		testtiming.Start + "TestA (failed after 1.0s)\nstarted x\n" + testtiming.End,
		testtiming.Start + "TestB (failed after 2.0s)\nstarted y",
	}
	if !slices.Equal(got, want) {
		t.Errorf("timingLogs: %q, want %q", got, want)
	}
}

// hack/test.sh's summary says why a run was slow: the CPUs it could use and
// the load average at its start and end, each stage's CPU, and under a
// failed go-test the packages' report (packages.txt, with the failed tests'
// timing logs). Run with a stand-in for make whose go-test fails.
func TestTestScriptSummary(t *testing.T) {
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatalf("hack/test.sh needs bash: %v", err)
	}
	dir := t.TempDir()
	logs := filepath.Join(dir, "logs")
	fakeMake := filepath.Join(dir, "make")
	script := `#!/usr/bin/env bash
target=${!#}
if [ "$target" = go-test ]; then
	mkdir -p "$TEST_LOGS/go"
	printf 'FAIL  internal/e2e  1.0s  log  failed: TestX\n      timing log of TestX (failed after 1.0s)\n' >"$TEST_LOGS/go/packages.txt"
	exit 1
fi
`
	if err := os.WriteFile(fakeMake, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("bash", filepath.Join("..", "test.sh"))
	cmd.Env = append(os.Environ(), "MAKE="+fakeMake, "TEST_LOGS="+logs)
	out, err := cmd.CombinedOutput()
	if err == nil {
		t.Errorf("hack/test.sh passed with a failing go-test:\n%s", out)
	}
	summary, err := os.ReadFile(filepath.Join(logs, "summary.txt"))
	if err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^=== make test: FAIL in \d+s, \d+ CPU-s`),
		regexp.MustCompile(`(?m)^\d+( of \d+)? CPUs; load average (\S+ \S+ \S+|unknown) at the start, (\S+ \S+ \S+|unknown) at the end$`),
		regexp.MustCompile(`(?m)^stage +result +time +cpu +log$`),
		regexp.MustCompile(`(?m)^go-test +FAIL +\d+s +\d+s `),
		regexp.MustCompile(`(?m)^      timing log of TestX \(failed after 1.0s\)$`),
	} {
		if !want.Match(summary) {
			t.Errorf("summary.txt does not match %s:\n%s", want, summary)
		}
	}
}
