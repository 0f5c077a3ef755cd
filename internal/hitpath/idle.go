package hitpath

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"
)

// System calls (x86-64 numbers) that a thread of an idle server may be
// blocked in: futex, epoll_wait, epoll_pwait, epoll_pwait2, poll, ppoll,
// select, pselect6. A thread that valgrind keeps from running waits in a
// read of its scheduler's pipe: not idle. sleepSyscalls (nanosleep,
// clock_nanosleep) is the Go runtime's sysmon between its looks: idle, and
// its wake-ups do not count (its thread is not measured).
var (
	idleSyscalls  = []string{"202", "232", "281", "441", "7", "271", "23", "270"}
	sleepSyscalls = []string{"35", "230"}
)

// thread is what /proc tells of one thread.
type thread struct {
	state, syscall string
	// runs is how often it has been scheduled so far (schedstat).
	runs string
}

func (t thread) sleeping() bool { return t.state == "S" && slices.Contains(sleepSyscalls, t.syscall) }

func (t thread) idle() bool {
	return t.state == "S" && (slices.Contains(idleSyscalls, t.syscall) || t.sleeping())
}

// procFiles reads the /proc files of a process's threads, kept open (a
// look at /proc is then a few reads, not path lookups).
type procFiles struct {
	pid     int
	stat    *os.File // the process's: its number of threads
	threads string   // the number of threads when tasks was read
	tasks   map[string]*taskFiles
	buf     []byte
}

type taskFiles struct{ stat, syscall, schedstat *os.File }

func (p *procFiles) close() {
	if p.stat != nil {
		_ = p.stat.Close()
	}
	for _, t := range p.tasks {
		t.close()
	}
}

func (t *taskFiles) close() {
	for _, f := range []*os.File{t.stat, t.syscall, t.schedstat} {
		if f != nil {
			_ = f.Close()
		}
	}
}

// read returns the contents of an open /proc file.
func (p *procFiles) read(f *os.File) (string, error) {
	if p.buf == nil {
		p.buf = make([]byte, 4096)
	}
	n, err := f.ReadAt(p.buf, 0)
	if err != nil && !errors.Is(err, io.EOF) {
		return "", err
	}
	return string(p.buf[:n]), nil
}

// afterParen is what follows the ") " that ends the comm of a stat line.
func afterParen(stat string) []string {
	if i := strings.LastIndexByte(stat, ')'); i >= 0 {
		return strings.Fields(stat[i+1:])
	}
	return nil
}

// sample reads the threads of the process, by thread id.
func (p *procFiles) sample() (map[string]thread, error) {
	if p.stat == nil {
		f, err := os.Open(fmt.Sprintf("/proc/%d/stat", p.pid))
		if err != nil {
			return nil, err
		}
		p.stat, p.tasks = f, map[string]*taskFiles{}
	}
	st, err := p.read(p.stat)
	if err != nil {
		return nil, err
	}
	f := afterParen(st)
	if len(f) < 18 {
		return nil, fmt.Errorf("pid %d: bad stat %q", p.pid, st)
	}
	if n := f[17]; n != p.threads { // num_threads
		if err := p.scan(); err != nil {
			return nil, err
		}
		p.threads = n
	}
	out := make(map[string]thread, len(p.tasks))
	for tid, tf := range p.tasks {
		stat, err1 := p.read(tf.stat)
		sc, err2 := p.read(tf.syscall)
		ss, err3 := p.read(tf.schedstat)
		if err := errors.Join(err1, err2, err3); err != nil {
			// The thread exited: read the tasks again next time.
			tf.close()
			delete(p.tasks, tid)
			p.threads = ""
			continue
		}
		var t thread
		if f := afterParen(stat); len(f) > 0 {
			t.state = f[0]
		}
		if f := strings.Fields(sc); len(f) > 0 {
			t.syscall = f[0]
		}
		if f := strings.Fields(ss); len(f) > 2 {
			t.runs = f[2]
		}
		out[tid] = t
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("pid %d has no threads", p.pid)
	}
	return out, nil
}

// scan opens the files of threads it has not seen.
func (p *procFiles) scan() error {
	dir := fmt.Sprintf("/proc/%d/task", p.pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return err
	}
	for _, e := range ents {
		if _, ok := p.tasks[e.Name()]; ok {
			continue
		}
		var tf taskFiles
		var errs []error
		for name, f := range map[string]**os.File{"stat": &tf.stat, "syscall": &tf.syscall, "schedstat": &tf.schedstat} {
			var err error
			*f, err = os.Open(filepath.Join(dir, e.Name(), name))
			errs = append(errs, err)
		}
		if errors.Join(errs...) != nil {
			tf.close() // it exited
			continue
		}
		p.tasks[e.Name()] = &tf
	}
	return nil
}

// watcher tells when a server is idle, and when it wakes while idle (a
// timer), from /proc.
type watcher struct {
	procFiles
	// last are the threads at the last idle point.
	last map[string]thread
	// sysmon is the thread of the Go runtime's sysmon, once known (the
	// thread that sleeps at an idle point): it wakes on its own clock, and
	// the watcher ignores it.
	sysmon string
}

// sample reads the server's threads but sysmon's.
func (w *watcher) sample() (map[string]thread, error) {
	m, err := w.procFiles.sample()
	delete(m, w.sysmon)
	return m, err
}

const (
	// pollEvery is how often the watcher looks.
	pollEvery = 500 * time.Microsecond
	// settleLooks is how many looks in a row must find the server idle
	// and unchanged.
	settleLooks = 3
)

// same reports whether a and b show the same threads, none of them
// scheduled in between.
func same(a, b map[string]thread) bool {
	return maps.Equal(a, b)
}

func allIdle(m map[string]thread) bool {
	for _, t := range m {
		if !t.idle() {
			return false
		}
	}
	return true
}

// settle returns once the server is idle: every thread blocked in a wait,
// none scheduled over settleLooks looks.
func (w *watcher) settle(ctx context.Context) error { return w.settleFor(ctx, 0) }

// settleFor is settle, the server idle for at least span too.
func (w *watcher) settleFor(ctx context.Context, span time.Duration) error {
	deadline := time.Now().Add(time.Minute)
	var prev map[string]thread
	var since time.Time
	n := 0
	for {
		cur, err := w.sample()
		if err != nil {
			return err
		}
		if w.sysmon == "" {
			// sysmon's looks change its switches: compare the rest.
			for tid, t := range cur {
				if t.sleeping() {
					t.runs = ""
					cur[tid] = t
				}
			}
		}
		switch {
		case !allIdle(cur):
			n = 0
		case prev != nil && same(prev, cur):
			n++
		default:
			n, since = 1, time.Now()
		}
		if n >= settleLooks && time.Since(since) >= span {
			if w.sysmon == "" {
				for tid, t := range cur {
					if t.sleeping() {
						w.sysmon = tid
						delete(cur, tid)
					}
				}
			}
			w.last = cur
			return nil
		}
		prev = cur
		if time.Now().After(deadline) {
			return fmt.Errorf("pid %d did not become idle within a minute: %v", w.pid, cur)
		}
		if err := sleep(ctx, pollEvery); err != nil {
			return err
		}
	}
}

// tickSettle is how long the server must stay idle after a timer woke it:
// the netpoller's wait for a timer is cut to whole milliseconds, so it may
// wake up to a millisecond early, find the timer not due, and wait again.
const tickSettle = 10 * time.Millisecond

// wake waits until the idle server wakes (a timer fires), at most until
// deadline, and settles after it (for tickSettle). It reports whether the
// server woke, and when it was seen to.
func (w *watcher) wake(ctx context.Context, deadline time.Time) (bool, time.Time, error) {
	for time.Now().Before(deadline) {
		cur, err := w.sample()
		if err != nil {
			return false, time.Time{}, err
		}
		if !same(w.last, cur) {
			at := time.Now()
			return true, at, w.settleFor(ctx, tickSettle)
		}
		if err := sleep(ctx, pollEvery); err != nil {
			return false, time.Time{}, err
		}
	}
	return false, time.Time{}, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
