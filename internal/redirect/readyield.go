package redirect

import (
	"net"
	"runtime"
	"sync/atomic"
)

// Yielding before a read.
//
// Go reads a socket before it waits on it. On a keep-alive connection the
// read that follows a response therefore almost always finds nothing (the
// client has not answered yet): it fails with EAGAIN, the goroutine parks in
// the netpoller, and it reads again once woken. That is three system calls a
// request (plus a share of an epoll_wait) where an event loop such as nginx's
// makes two, and the wasted read with its park and wake-up is several percent
// of the CPU of a request.
//
// When the server is busy, yielding the processor before that read lets the
// other connections' requests be served first, which gives this connection's
// client the time to send its next request: the read then finds it. Four
// bounds keep the yield from costing more than it saves:
//
//   - Idle: when the server is not busy the yield is useless, and with idle
//     processors it can wake one of them, which costs more than the read it
//     saves. So a connection checks that its yields help: after one yield in
//     yieldCheckEvery it looks at its socket (a non-blocking peek), and if the
//     next request has not arrived, it reads without yielding for the next
//     yieldSkipReads reads, then checks again.
//   - Fairness: a processor polls the network only when its own run queue
//     and the global one are empty (or when the runtime's 10ms backstop poll
//     comes round), and yielding goroutines that keep finding requests keep
//     the global queue full; unbounded, they starved the connections waiting
//     in the netpoller until that backstop (a p99 of 10ms at 64 connections
//     in hack/bench-redirect.sh). So a connection yields before at most
//     yieldStreak reads in a row and reads at once on the next, where it
//     parks unless its client has already sent more: a request that arrives
//     on a waiting connection waits at most yieldStreak+1 passes over the
//     connections that keep finding requests, where without the yield it
//     waits one.
//   - Processors: the gain was measured with one and two processors
//     (GOMAXPROCS); with more, every yield also takes the global run queue's
//     lock that they all share and may wake an idle one, which was not
//     measured here. So a connection yields only if GOMAXPROCS is at most
//     yieldMaxProcs when it is accepted.
//   - Semantics: a yield delays a read by at most one pass over the run
//     queue; it changes no answer, holds no resource and touches no deadline.
const (
	yieldCheckEvery = 16
	yieldSkipReads  = 64
	yieldStreak     = 2
	yieldMaxProcs   = 2
)

// readYield decides, for one connection, whether to yield before reading
// its next request. The zero value yields and checks on the first read.
type readYield struct {
	skip   uint8 // reads left to do without yielding
	check  uint8 // yields left before the next checked one
	streak uint8 // yields in a row
}

// plan returns whether to yield before this read, and whether to check
// after the yield that the next request has arrived (then call checked).
func (y *readYield) plan() (yield, check bool) {
	switch {
	case y.skip > 0:
		y.skip--
		return false, false
	case y.streak == yieldStreak:
		y.streak = 0
		return false, false
	}
	y.streak++
	if y.check > 0 {
		y.check--
		return true, false
	}
	return true, true
}

// checked records whether the next request had arrived after a checked yield.
func (y *readYield) checked(arrived bool) {
	if arrived {
		y.check = yieldCheckEvery - 1
		return
	}
	y.skip, y.streak = yieldSkipReads, 0
}

// Write writes to the connection (a response, or fasthttp's 100 Continue);
// the next Read may yield first. A write made outside the respond phase is
// timed as one (see timedConn.writeOutsideRespond).
func (c *timedConn) Write(p []byte) (int, error) {
	c.wrote = true
	if v := phaseStamp(c.state.Load()); v.phase() != phaseRespond && v.phase() != phaseExpired && c.clock != nil {
		return c.writeOutsideRespond(p, v)
	}
	return c.Conn.Write(p)
}

// Read reads from the connection; after a Write it may yield first (see
// readYield).
func (c *timedConn) Read(p []byte) (int, error) {
	if c.wrote {
		c.wrote = false
		if c.peek != nil {
			if yield, check := c.yield.plan(); yield {
				runtime.Gosched()
				if check {
					c.yield.checked(c.peek.pending())
				}
			}
		}
	}
	return c.Conn.Read(p)
}

// newTimedConn wraps an accepted connection.
func newTimedConn(c net.Conn, clock *atomic.Int64) *timedConn {
	tc := &timedConn{Conn: c, clock: clock}
	if yieldEnabled && runtime.GOMAXPROCS(0) <= yieldMaxProcs {
		tc.peek = newInputPeeker(c)
	}
	return tc
}
