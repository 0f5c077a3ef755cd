package redirect

import (
	"errors"
	"net"
	"os"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// TestReadYieldPlan: a connection yields and checks on its first read;
// while checks find the next request there, it yields before two reads in
// three (never three in a row) and checks one yield in yieldCheckEvery;
// after a check that finds nothing, it reads yieldSkipReads times without
// yielding, then checks again.
func TestReadYieldPlan(t *testing.T) {
	g := NewWithT(t)
	type step struct{ yield, check bool }
	var (
		yc = step{true, true}
		y  = step{true, false}
		n  = step{false, false}
	)
	run := func(r *readYield, reads int) (steps []step) {
		for range reads {
			yield, check := r.plan()
			steps = append(steps, step{yield, check})
		}
		return steps
	}

	var r readYield
	g.Expect(run(&r, 1)).To(Equal([]step{yc}), "the first read yields and checks")
	r.checked(true)
	g.Expect(run(&r, 5)).To(Equal([]step{y, n, y, y, n}), "at most %d yields in a row", yieldStreak)

	r = readYield{}
	run(&r, 1)
	r.checked(true)
	yields, checks, row := 0, 0, 0
	for i := range 3 * yieldCheckEvery {
		yield, check := r.plan()
		if !yield {
			row = 0
			continue
		}
		yields++
		row++
		g.Expect(row).To(BeNumerically("<=", yieldStreak), "read %d", i)
		if check {
			checks++
			g.Expect(yields).To(Equal(yieldCheckEvery), "the check is the %dth yield after the last", yieldCheckEvery)
			yields = 0
			r.checked(true)
		}
	}
	g.Expect(checks).To(Equal(2), "%d reads are %d yields", 3*yieldCheckEvery, 2*yieldCheckEvery)

	r = readYield{}
	run(&r, 1)
	r.checked(false)
	steps := run(&r, yieldSkipReads+2)
	g.Expect(steps[:yieldSkipReads]).To(HaveEach(n), "an idle connection reads %d times without yielding", yieldSkipReads)
	g.Expect(steps[yieldSkipReads:]).To(Equal([]step{yc, yc}), "then checks again (and again, until a check finds a request)")
}

// tcpPair returns the two ends of a loopback TCP connection.
func tcpPair(t *testing.T) (server, client net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ln.Close() }()
	client, err = net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	server, err = ln.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = server.Close(); _ = client.Close() })
	return server, client
}

// TestInputPeeker: pending reports waiting bytes and the end of the stream
// without consuming them or blocking, and allocates nothing.
func TestInputPeeker(t *testing.T) {
	g := NewWithT(t)
	server, client := tcpPair(t)
	p := newInputPeeker(server)
	g.Expect(p).NotTo(BeNil())
	g.Expect(p.pending()).To(BeFalse(), "nothing sent yet")
	g.Expect(testing.AllocsPerRun(100, func() { p.pending() })).To(BeZero())

	_, err := client.Write([]byte("GET"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(p.pending).Should(BeTrue(), "bytes sent")
	g.Expect(p.pending()).To(BeTrue(), "a peek consumes nothing")
	buf := make([]byte, 8)
	n, err := server.Read(buf)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(buf[:n])).To(Equal("GET"), "the read gets the peeked bytes")
	g.Expect(p.pending()).To(BeFalse(), "all read")

	g.Expect(client.Close()).To(Succeed())
	g.Eventually(p.pending).Should(BeTrue(), "the end of the stream is waiting too")
	g.Expect(server.Close()).To(Succeed())
	g.Expect(p.pending()).To(BeTrue(), "a closed connection's read fails at once")
}

// TestTimedConnYieldsAfterAResponse: the read that follows a write is the
// one that may yield and checks, and the check's finding steers the
// connection's next reads.
func TestTimedConnYieldsAfterAResponse(t *testing.T) {
	g := NewWithT(t)
	server, client := tcpPair(t)
	c := newTimedConn(server)
	g.Expect(c.peek).NotTo(BeNil())
	buf := make([]byte, 8)

	// The next request has arrived by the read after a response.
	_, err := client.Write([]byte("next"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Eventually(c.peek.pending).Should(BeTrue())
	_, err = c.Write([]byte("response"))
	g.Expect(err).NotTo(HaveOccurred())
	n, err := c.Read(buf)
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(string(buf[:n])).To(Equal("next"))
	g.Expect(c.yield).To(Equal(readYield{check: yieldCheckEvery - 1, streak: 1}), "a check found the request: keep yielding")

	// A read that follows a read does not yield.
	g.Expect(c.SetReadDeadline(time.Now().Add(-time.Second))).To(Succeed())
	_, err = c.Read(buf)
	g.Expect(errors.Is(err, os.ErrDeadlineExceeded)).To(BeTrue())
	g.Expect(c.yield).To(Equal(readYield{check: yieldCheckEvery - 1, streak: 1}), "no write, no yield")

	// Nothing has arrived by the read after a response.
	c.yield = readYield{}
	_, err = c.Write([]byte("response"))
	g.Expect(err).NotTo(HaveOccurred())
	_, err = c.Read(buf)
	g.Expect(errors.Is(err, os.ErrDeadlineExceeded)).To(BeTrue())
	g.Expect(c.yield).To(Equal(readYield{skip: yieldSkipReads}), "a check found nothing: read without yielding")
}
