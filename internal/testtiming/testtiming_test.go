package testtiming

import (
	"fmt"
	"strings"
	"testing"
)

// fakeT is a test whose name, failure and output the test sets and reads.
type fakeT struct {
	testing.TB
	name     string
	failed   bool
	logged   []string
	cleanups []func()
}

func (f *fakeT) Name() string      { return f.name }
func (f *fakeT) Failed() bool      { return f.failed }
func (f *fakeT) Helper()           {}
func (f *fakeT) Log(args ...any)   { f.logged = append(f.logged, fmt.Sprint(args...)) }
func (f *fakeT) Cleanup(fn func()) { f.cleanups = append(f.cleanups, fn) }

// end runs the cleanups, last registered first, as a test's end does.
func (f *fakeT) end() {
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
}

// A failed test prints its timing log: its steps, and each subtest that
// kept one with its result; a subtest that failed prints its own. A test
// that passed prints nothing but the steps it logged.
func TestFailedTestsPrintTheirTimingLog(t *testing.T) {
	parent := &fakeT{name: t.Name() + "Parent"}
	if first := Of(parent); Of(parent) != first {
		t.Fatal("Of started a second log for the same test")
	}
	Of(parent).Logf("waited %d s", 3)
	fine := &fakeT{name: parent.name + "/fine"}
	Of(fine).Logf("quick")
	fine.end()
	broken := &fakeT{name: parent.name + "/broken", failed: true}
	Of(broken).Logf("clicked")
	broken.end()
	parent.failed = true
	parent.end()

	if len(fine.logged) != 1 || fine.logged[0] != "quick" {
		t.Errorf("a passing test logged %q, want only its step", fine.logged)
	}
	brokenLog := timingLog(t, broken)
	for _, want := range []string{Start + broken.name + " (failed after ", "load average ", "clicked\n", "\n" + End} {
		if !strings.Contains(brokenLog, want) {
			t.Errorf("the failed subtest's timing log lacks %q:\n%s", want, brokenLog)
		}
	}
	parentLog := timingLog(t, parent)
	for _, want := range []string{"waited 3 s\n", "ok after ", "s: fine\n", "FAILED after ", "s: broken\n"} {
		if !strings.Contains(parentLog, want) {
			t.Errorf("the failed parent's timing log lacks %q:\n%s", want, parentLog)
		}
	}
	if strings.Contains(parentLog, "clicked") {
		t.Errorf("the parent's timing log has its subtest's steps:\n%s", parentLog)
	}
}

// timingLog is the last thing f logged, which must be its timing log.
func timingLog(t *testing.T, f *fakeT) string {
	t.Helper()
	if len(f.logged) == 0 || !strings.HasPrefix(f.logged[len(f.logged)-1], Start) {
		t.Fatalf("%s printed no timing log: %q", f.name, f.logged)
	}
	return f.logged[len(f.logged)-1]
}
