//go:build linux

package redirect

import (
	"bufio"
	"context"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// emfileHelperEnv makes the test binary a redirect server with few file
// descriptors (see TestOutOfFileDescriptors).
const emfileHelperEnv = "LINKFORGE_EMFILE_HELPER"

// emfileLimit is the helper's RLIMIT_NOFILE: room for the runtime, the
// listener and a few connections.
const emfileLimit = 32

// TestMain runs the EMFILE helper instead of the tests when asked to.
func TestMain(m *testing.M) {
	if os.Getenv(emfileHelperEnv) != "" {
		emfileHelper()
		return
	}
	os.Exit(m.Run())
}

func emfileHelper() {
	lim := syscall.Rlimit{Cur: emfileLimit, Max: emfileLimit}
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		panic(err)
	}
	r := New(Options{})
	links, nss := &fakeInformer{synced: true}, &fakeInformer{synced: true}
	_ = r.WatchShortLinks(links)
	_ = r.WatchNamespaces(nss)
	links.h.OnAdd(transformed(link("ns", "a", "a", "https://example.com/a")), true)
	opts := DefaultServerOptions()
	opts.HeaderTimeout = time.Minute // held connections keep their descriptors
	s := NewServer("127.0.0.1:0", r, opts)
	if err := s.Listen(); err != nil {
		panic(err)
	}
	_, _ = os.Stdout.WriteString(s.Addr().String() + "\n")
	_ = s.Start(context.Background())
}

// Defect 1: out of file descriptors, the epoll server's loops spun at 100%
// CPU on a level-triggered listener (accept4 failing with EMFILE) and
// stopped serving. Now the process, with RLIMIT_NOFILE lowered, stays
// nearly idle while clients hold more connections than it has descriptors,
// and serves again once they close.
func TestOutOfFileDescriptors(t *testing.T) {
	g := NewWithT(t)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), emfileHelperEnv+"=1")
	stdout, err := cmd.StdoutPipe()
	g.Expect(err).NotTo(HaveOccurred())
	cmd.Stderr = os.Stderr
	g.Expect(cmd.Start()).To(Succeed())
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	line, err := bufio.NewReader(stdout).ReadString('\n')
	g.Expect(err).NotTo(HaveOccurred())
	addr := strings.TrimSpace(line)

	// More connections than descriptors: the kernel completes them and
	// queues those the server cannot accept.
	held := make([]net.Conn, 0, 2*emfileLimit)
	for range 2 * emfileLimit {
		c, err := net.Dial("tcp", addr)
		g.Expect(err).NotTo(HaveOccurred())
		held = append(held, c)
	}
	// Once it is out of descriptors, a request gets no answer.
	probe := func() error {
		c, err := net.DialTimeout("tcp", addr, time.Second)
		if err != nil {
			return err
		}
		defer func() { _ = c.Close() }()
		_ = c.SetDeadline(time.Now().Add(500 * time.Millisecond))
		if _, err := c.Write([]byte("GET /ns/a HTTP/1.1\r\nHost: x\r\n\r\n")); err != nil {
			return err
		}
		status, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			return err
		}
		if !strings.HasPrefix(status, "HTTP/1.1 302 ") {
			return &net.AddrError{Err: "unexpected status " + status, Addr: addr}
		}
		return nil
	}
	g.Expect(probe()).NotTo(Succeed(), "served although out of descriptors")

	// Over two seconds out of descriptors, the server uses little CPU: a
	// tenth of a core at most, where the spin took a whole one. CPU time,
	// not wall time: a loaded machine gives the process less, never more.
	before := cpuTime(t, cmd.Process.Pid)
	began := time.Now()
	g.Consistently(func() time.Duration { return cpuTime(t, cmd.Process.Pid) - before }).
		WithTimeout(2 * time.Second).WithPolling(200 * time.Millisecond).
		Should(BeNumerically("<", 200*time.Millisecond))
	t.Logf("CPU time out of descriptors: %v in %v", cpuTime(t, cmd.Process.Pid)-before, time.Since(began))

	for _, c := range held {
		_ = c.Close()
	}
	g.Eventually(probe).WithTimeout(10 * time.Second).WithPolling(100 * time.Millisecond).Should(Succeed())
}

// cpuTime is the user plus system CPU time of process pid.
func cpuTime(t *testing.T, pid int) time.Duration {
	t.Helper()
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command (which may hold spaces): state is field 3,
	// utime 14 and stime 15.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	const clockTicks = 100 // USER_HZ on Linux
	return time.Duration(utime+stime) * time.Second / clockTicks
}
