package redirect

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	"github.com/valyala/fasthttp"
)

// ServerOptions are the limits and timeouts of the redirect port. Requests
// are small GETs, so every bound is tight; see DefaultServerOptions.
type ServerOptions struct {
	// HeaderTimeout bounds the time a request may take to arrive: from
	// accepting the connection to the end of its first request, and from the
	// first byte of each later request to its end. A connection that sends
	// nothing is closed after it, not after IdleTimeout.
	HeaderTimeout time.Duration
	// IdleTimeout closes a keep-alive connection that waits this long for
	// the first byte of its next request (0: HeaderTimeout, as fasthttp).
	IdleTimeout time.Duration
	// WriteTimeout bounds writing a response to a client that stops reading.
	WriteTimeout time.Duration
	// MaxHeaderBytes bounds the request line and headers (431 above it).
	MaxHeaderBytes int
	// MaxConnections bounds the connections served at once; more are
	// answered 503 and closed.
	MaxConnections int
	// MaxRequestsPerConnection closes a keep-alive connection after this many
	// requests (0: no limit), so that clients behind a long-lived connection
	// spread over new replicas too.
	MaxRequestsPerConnection int
	// ShutdownTimeout bounds the drain on shutdown; connections still open
	// after it are closed.
	ShutdownTimeout time.Duration

	// connState, if set, also sees every connection state change (tests).
	connState func(net.Conn, fasthttp.ConnState)
}

// DefaultServerOptions are the defaults of the redirector's flags.
func DefaultServerOptions() ServerOptions {
	return ServerOptions{
		HeaderTimeout:            10 * time.Second,
		IdleTimeout:              120 * time.Second,
		WriteTimeout:             10 * time.Second,
		MaxHeaderBytes:           16 << 10,
		MaxConnections:           50_000,
		MaxRequestsPerConnection: 10_000,
		ShutdownTimeout:          30 * time.Second,
	}
}

// maxRequestBody is the largest request body read (and discarded); a larger
// one is answered 413 and the connection closed. No request needs a body.
const maxRequestBody = 4 << 10

// Server is the redirect port: a fasthttp server with the Redirector's
// handler. It is a manager Runnable.
type Server struct {
	addr string
	opts ServerOptions
	srv  *fasthttp.Server
	log  logr.Logger

	mu    sync.Mutex
	ln    net.Listener
	conns map[*timedConn]struct{} // open connections: timed by watch, closed after ShutdownTimeout

	// clock is the watchdog's last reading of the monotonic time since
	// base: the connections' phases are stamped with it, not with
	// time.Now, and a step of the wall clock moves no timeout.
	clock atomic.Int64
	base  time.Time
	tick  time.Duration
}

// NewServer returns the redirect server of r on addr (host:port).
func NewServer(addr string, r *Redirector, opts ServerOptions) *Server {
	s := &Server{addr: addr, opts: opts, log: r.log.WithName("server"), conns: map[*timedConn]struct{}{},
		base: time.Now(), tick: watchdogTick(opts)}
	s.srv = &fasthttp.Server{
		Handler: func(ctx *fasthttp.RequestCtx) {
			if c, ok := ctx.Conn().(*timedConn); ok {
				c.enter(phaseRespond, s.clock.Load())
			}
			r.handle(ctx)
		},
		ErrorHandler: r.serveError,
		// No ReadTimeout, IdleTimeout or WriteTimeout: fasthttp would set
		// three deadlines a keep-alive request (the idle wait, the head after
		// its first byte, the write after the handler), each a clock read and
		// a runtime timer update, where the watchdog (watch) stamps a phase
		// with an atomic store and keeps the same bounds: a head from the
		// accept or from its first byte, an idle wait, and every write,
		// wherever fasthttp makes it (timedConn.writeOutsideRespond).
		LazyRequestTime:              true,
		ReadBufferSize:               opts.MaxHeaderBytes,
		Concurrency:                  opts.MaxConnections,
		MaxRequestsPerConn:           opts.MaxRequestsPerConnection,
		MaxRequestBodySize:           maxRequestBody,
		DisablePreParseMultipartForm: true,
		NoDefaultServerHeader:        true,
		NoDefaultContentType:         true,
		// Requests answered during the drain close their connection.
		CloseOnShutdown: true,
		// Errors may quote requests; they are the client's, not ours.
		SecureErrorLogMessage: true,
		Logger:                fasthttpLogger{s.log},
		// A function of its own, not the method value s.track: the two
		// changes of every request (StateActive, StateIdle) are stamped
		// here, without the method value's wrapper and track's call.
		ConnState: func(nc net.Conn, state fasthttp.ConnState) {
			if c, ok := nc.(*timedConn); ok && s.opts.connState == nil {
				switch state {
				case fasthttp.StateActive:
					c.leave(phaseIdle, phaseHead, s.clock.Load())
					return
				case fasthttp.StateIdle:
					c.enter(phaseIdle, s.clock.Load())
					return
				}
			}
			s.track(nc, state)
		},
	}
	return s
}

// NeedLeaderElection is false: every replica serves.
func (*Server) NeedLeaderElection() bool { return false }

// Listen binds the address. It does not set SO_REUSEPORT, so a second
// process on the same port fails here instead of sharing the traffic.
// Start calls it if it has not been called.
func (s *Server) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return fmt.Errorf("redirect port: %w", err)
	}
	s.ln = &retryListener{Listener: ln, log: s.log, clock: &s.clock}
	return nil
}

// Addr is the bound address, once Listen has succeeded.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Start serves until ctx ends, then drains: it stops accepting, closes idle
// connections, answers the requests in progress with Connection: close and,
// after ShutdownTimeout, closes what is left.
func (s *Server) Start(ctx context.Context) error {
	if err := s.Listen(); err != nil {
		return err
	}
	s.clock.Store(int64(time.Since(s.base)))
	served := make(chan error, 1)
	go func() { served <- s.srv.Serve(s.ln) }()
	watching, stopWatching := context.WithCancel(context.Background())
	defer stopWatching()
	go s.watch(watching)
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	drain, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	if err := s.srv.ShutdownWithContext(drain); err != nil {
		s.mu.Lock()
		s.log.Info("closing connections still open after the shutdown timeout", "connections", len(s.conns))
		for c := range s.conns {
			_ = c.Close()
		}
		s.mu.Unlock()
	}
	// Serve may not have registered the listener when the drain began.
	_ = s.ln.Close()
	return <-served
}

// track keeps the set of open connections and the phase each is in. It
// runs on every state change, twice a request, so it locks only when a
// connection opens or closes.
func (s *Server) track(nc net.Conn, state fasthttp.ConnState) {
	if c, ok := nc.(*timedConn); ok {
		switch state {
		case fasthttp.StateNew:
			s.mu.Lock()
			s.conns[c] = struct{}{}
			s.mu.Unlock()
		case fasthttp.StateActive:
			// The first byte of a request after an idle wait. The first
			// request's head is timed from the accept (the stamp the
			// listener gave it), so it is not restamped. (NewServer's
			// ConnState stamps this and StateIdle itself unless a test
			// watches the states.)
			c.leave(phaseIdle, phaseHead, s.clock.Load())
		case fasthttp.StateIdle:
			c.enter(phaseIdle, s.clock.Load())
		case fasthttp.StateClosed, fasthttp.StateHijacked:
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
		}
	}
	if s.opts.connState != nil {
		s.opts.connState(nc, state)
	}
}

// connPhase is what a connection is waiting for; each phase has its timeout.
type connPhase uint32

const (
	// phaseHead: a request head, from the connection's accept or from the
	// first byte of a later request (HeaderTimeout).
	phaseHead connPhase = iota
	// phaseIdle: the first byte of the next request (IdleTimeout).
	phaseIdle
	// phaseRespond: the handler, then the client reading the response (WriteTimeout).
	phaseRespond
	// phaseExpired: a timeout fired; the connection is being closed.
	phaseExpired
)

// timedConn is an accepted connection with the phase it is in and when
// (the watchdog's clock) that phase began. Stamping a phase is an atomic
// store, where a deadline costs a clock read and a timer update.
type timedConn struct {
	net.Conn
	state atomic.Uint64 // a phaseStamp

	// clock is the server's watchdog clock (nil: the connection's writes
	// are not timed; tests that build a timedConn by hand).
	clock *atomic.Int64

	// Owned by the goroutine serving the connection (see readYield).
	wrote bool         // something was written since the last Read
	yield readYield    // whether to yield before the next read
	peek  *inputPeeker // nil: never yields
	// agent is the User-Agent of the last request, and what it reads as
	// (Redirector.agentOf).
	agent connAgent
}

// phaseStamp packs a phase and its start (nanoseconds since the server's
// base, which fit in 62 bits for 146 years) into one word.
type phaseStamp uint64

func stamp(p connPhase, now int64) phaseStamp {
	return phaseStamp(uint64(p)<<62 | uint64(now)&(1<<62-1))
}

func (v phaseStamp) phase() connPhase { return connPhase(v >> 62) }
func (v phaseStamp) since() int64     { return int64(v & (1<<62 - 1)) }

func (c *timedConn) enter(p connPhase, now int64) { c.state.Store(uint64(stamp(p, now))) }

// writeOutsideRespond writes p while the connection is in phase v.phase()
// (a request head or an idle wait) and times the write by WriteTimeout, as
// a response: fasthttp writes there too. With pipelined requests it flushes
// the responses it queued only when the buffered input ends part-way
// through the next request, after that request's StateActive moved the
// connection to phaseHead; it writes a 100 Continue and its error responses
// (400, 408, 431) in the head phase as well. Timed as a head, a client that
// stopped reading held the connection for HeaderTimeout (or forever with
// HeaderTimeout 0). For the write's duration the connection is in
// phaseRespond; afterwards it is back in its phase, whose clock did not run
// during the write: the client was waiting for the server, not the other
// way round. If the watchdog expired the write, the phase stays expired.
func (c *timedConn) writeOutsideRespond(p []byte, v phaseStamp) (int, error) {
	start := c.clock.Load()
	respond := stamp(phaseRespond, start)
	if !c.state.CompareAndSwap(uint64(v), uint64(respond)) {
		// The watchdog expired the phase meanwhile: its deadline bounds the write.
		return c.Conn.Write(p)
	}
	n, err := c.Conn.Write(p)
	c.state.CompareAndSwap(uint64(respond), uint64(stamp(v.phase(), v.since()+c.clock.Load()-start)))
	return n, err
}

// leave moves the connection from phase from to phase to, if it is in from.
func (c *timedConn) leave(from, to connPhase, now int64) {
	if v := phaseStamp(c.state.Load()); v.phase() == from {
		c.state.CompareAndSwap(uint64(v), uint64(stamp(to, now)))
	}
}

// watchdogTick is how often the watchdog reads the clock and checks the
// connections: a tenth of the shortest timeout, within 5ms and 1s. A
// timeout fires between its duration and its duration plus two ticks.
func watchdogTick(o ServerOptions) time.Duration {
	shortest := time.Duration(0)
	for _, d := range []time.Duration{o.HeaderTimeout, o.IdleTimeout, o.WriteTimeout} {
		if d > 0 && (shortest == 0 || d < shortest) {
			shortest = d
		}
	}
	if shortest == 0 {
		return time.Second
	}
	return min(max(shortest/10, 5*time.Millisecond), time.Second)
}

// timeout is the timeout of phase p (0: none).
func (s *Server) timeout(p connPhase) time.Duration {
	switch p {
	case phaseHead:
		return s.opts.HeaderTimeout
	case phaseIdle:
		if s.opts.IdleTimeout <= 0 {
			// As fasthttp's own IdleTimeout: none set, the header timeout.
			return s.opts.HeaderTimeout
		}
		return s.opts.IdleTimeout
	case phaseRespond:
		return s.opts.WriteTimeout
	}
	return 0
}

// watch advances the clock every tick and times out the connections that
// have been in one phase for longer than its timeout. A phase may have been
// stamped with a clock as old as the gap between two of the watchdog's
// readings (a tick, or more when it ran late), so that gap is added to each
// timeout: none fires early. A timed-out connection gets a deadline in the
// past, so that fasthttp sees what a deadline of its own would have given
// it: a timeout error from the blocked read (a 408 for a partial head, a
// silent close otherwise) or write. Only a connection still in the phase
// the scan saw is timed out (a compare-and-swap of its stamp), so a request
// that began meanwhile is not cut off.
func (s *Server) watch(ctx context.Context) {
	t := time.NewTicker(s.tick)
	defer t.Stop()
	type candidate struct {
		c *timedConn
		v phaseStamp
	}
	var expired []candidate
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			n := int64(time.Since(s.base))
			slack := max(s.tick, time.Duration(n-s.clock.Swap(n)))
			expired = expired[:0]
			s.mu.Lock()
			for c := range s.conns {
				v := phaseStamp(c.state.Load())
				if d := s.timeout(v.phase()); d > 0 && time.Duration(n-v.since()) > d+slack {
					expired = append(expired, candidate{c, v})
				}
			}
			s.mu.Unlock()
			now := time.Now()
			past := now.Add(-time.Second)
			for _, e := range expired {
				if !e.c.state.CompareAndSwap(uint64(e.v), uint64(stamp(phaseExpired, n))) {
					continue
				}
				if e.v.phase() == phaseRespond {
					_ = e.c.SetDeadline(past)
					continue
				}
				// The read fails; the 408 fasthttp then writes for a
				// partial head gets the write timeout.
				_ = e.c.SetReadDeadline(past)
				if s.opts.WriteTimeout > 0 {
					_ = e.c.SetWriteDeadline(now.Add(s.opts.WriteTimeout))
				}
			}
		}
	}
}

// retryListener waits and retries when Accept fails for want of resources
// (file descriptors, buffers, memory) or a connection aborted before it was
// accepted: fasthttp's Serve returns on any accept error but a timeout, which
// would leave the port bound and unserved. The backoff (5ms doubling to 1s,
// as net/http) keeps a process out of descriptors from spinning; the
// connections wait in the kernel's queue until descriptors are freed.
// It returns each connection as a timedConn in phaseHead, from now.
type retryListener struct {
	net.Listener
	log     logr.Logger
	clock   *atomic.Int64
	mu      sync.Mutex
	lastLog time.Time
}

func (l *retryListener) Accept() (net.Conn, error) {
	var delay time.Duration
	for {
		c, err := l.Listener.Accept()
		if err == nil {
			tc := newTimedConn(c, l.clock)
			tc.enter(phaseHead, l.clock.Load())
			return tc, nil
		}
		if !retryableAcceptError(err) {
			return c, err
		}
		delay = min(max(2*delay, 5*time.Millisecond), time.Second)
		l.mu.Lock()
		if time.Since(l.lastLog) > time.Minute {
			l.lastLog = time.Now()
			l.log.Info("cannot accept connections; retrying", "error", err.Error(), "after", delay.String())
		}
		l.mu.Unlock()
		time.Sleep(delay)
	}
}

func retryableAcceptError(err error) bool {
	for _, errno := range []syscall.Errno{syscall.EMFILE, syscall.ENFILE, syscall.ENOBUFS, syscall.ENOMEM, syscall.ECONNABORTED} {
		if errors.Is(err, errno) {
			return true
		}
	}
	return false
}

// fasthttpLogger sends fasthttp's messages (accept errors, the connection
// limit) to the redirector's log.
type fasthttpLogger struct{ log logr.Logger }

func (l fasthttpLogger) Printf(format string, args ...any) {
	l.log.Info(fmt.Sprintf(format, args...))
}
