package redirect

import (
	"errors"
	"net"
	"os"
	"runtime"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

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
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(yieldMaxProcs))
	server, client := tcpPair(t)
	c := newTimedConn(server, nil)
	g.Expect(c.peek).NotTo(BeNil(), "GOMAXPROCS %d: yields", yieldMaxProcs)
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

// TestTimedConnDoesNotYieldOnManyProcessors: a connection accepted while GOMAXPROCS
// is above yieldMaxProcs never yields (the gain was not measured there).
func TestTimedConnDoesNotYieldOnManyProcessors(t *testing.T) {
	g := NewWithT(t)
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(yieldMaxProcs + 1))
	server, _ := tcpPair(t)
	c := newTimedConn(server, nil)
	g.Expect(c.peek).To(BeNil(), "GOMAXPROCS %d: no yield", yieldMaxProcs+1)

	_, err := c.Write([]byte("response"))
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(c.SetReadDeadline(time.Now().Add(-time.Second))).To(Succeed())
	_, err = c.Read(make([]byte, 8))
	g.Expect(errors.Is(err, os.ErrDeadlineExceeded)).To(BeTrue())
	g.Expect(c.yield).To(Equal(readYield{}), "no plan, no check")
}
