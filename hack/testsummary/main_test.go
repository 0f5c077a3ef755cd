package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
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
