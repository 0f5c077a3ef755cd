// Package testtiming keeps a test's timing log, which the test prints only
// if it fails: when it started and ended (wall clock, to set beside the
// processes' logs), the machine's load average then, each step the test
// noted (Log.Logf) and each of its subtests that kept one (how long it ran,
// whether it failed), with the time since the test began and the load
// average at that moment. A test failing on a busy machine then says how
// busy the machine was and which step took the time. The end-to-end suites
// (internal/e2e, internal/clustere2e) keep one for every test and subtest
// (their newG), and make test's summary (hack/testsummary) copies the
// timing logs of the failed tests.
package testtiming

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"
)

// Start begins a printed timing log's first line and End is its last line,
// for hack/testsummary to find.
const (
	Start = "timing log of "
	End   = "(end of timing log)"
)

// Log is a test's timing log.
type Log struct {
	t     testing.TB
	start time.Time
	load  string
	mu    sync.Mutex
	steps []string
}

// running holds the running tests' logs by test name, so that a subtest's
// end is noted in its parent's.
var running sync.Map

// Of returns t's timing log, started by the first call. Call it first in
// the test: the log is printed by a cleanup, which then runs after the
// test's other cleanups and sees their failures.
func Of(t testing.TB) *Log {
	if l, ok := running.Load(t.Name()); ok {
		return l.(*Log)
	}
	l := &Log{t: t, start: time.Now(), load: LoadAverage()}
	if other, loaded := running.LoadOrStore(t.Name(), l); loaded {
		return other.(*Log)
	}
	t.Cleanup(l.end)
	return l
}

// Logf logs a step, as t.Logf does, and notes it in the timing log.
func (l *Log) Logf(format string, args ...any) {
	l.t.Helper()
	msg := fmt.Sprintf(format, args...)
	l.t.Log(msg)
	l.note(msg)
}

func (l *Log) note(msg string) {
	load, _, _ := strings.Cut(LoadAverage(), " ")
	line := fmt.Sprintf("%+8.1fs  load %-5s  %s", time.Since(l.start).Seconds(), load, msg)
	l.mu.Lock()
	l.steps = append(l.steps, line)
	l.mu.Unlock()
}

// end notes the test's end in its parent's log and, if it failed, prints
// its own.
func (l *Log) end() {
	name := l.t.Name()
	running.Delete(name)
	took := time.Since(l.start)
	failed := l.t.Failed()
	if i := strings.LastIndexByte(name, '/'); i > 0 {
		if parent, ok := running.Load(name[:i]); ok {
			result := "ok"
			if failed {
				result = "FAILED"
			}
			parent.(*Log).note(fmt.Sprintf("%s after %.1fs: %s", result, took.Seconds(), name[i+1:]))
		}
	}
	if !failed {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	var b strings.Builder
	fmt.Fprintf(&b, "%s%s (failed after %.1fs)\n", Start, name, took.Seconds())
	fmt.Fprintf(&b, "started %s, load average %s\n", l.start.Format("15:04:05.000"), l.load)
	for _, s := range l.steps {
		b.WriteString(s + "\n")
	}
	fmt.Fprintf(&b, "ended   %s, load average %s\n", time.Now().Format("15:04:05.000"), LoadAverage())
	b.WriteString(End)
	l.t.Log(b.String())
}

// LoadAverage is the machine's load average over 1, 5 and 15 minutes
// (/proc/loadavg), or "unknown".
func LoadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if f := strings.Fields(string(b)); err == nil && len(f) >= 3 {
		return strings.Join(f[:3], " ")
	}
	return "unknown"
}
