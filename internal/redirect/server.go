package redirect

import (
	"context"
	"errors"
	"fmt"
	"net"
	"sync"
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
	// the first byte of its next request.
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
	conns map[net.Conn]struct{} // open connections, closed after ShutdownTimeout
}

// NewServer returns the redirect server of r on addr (host:port).
func NewServer(addr string, r *Redirector, opts ServerOptions) *Server {
	s := &Server{addr: addr, opts: opts, log: r.log.WithName("server"), conns: map[net.Conn]struct{}{}}
	s.srv = &fasthttp.Server{
		Handler:                      r.handle,
		ErrorHandler:                 serveError,
		ReadTimeout:                  opts.HeaderTimeout,
		IdleTimeout:                  opts.IdleTimeout,
		WriteTimeout:                 opts.WriteTimeout,
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
		ConnState:             s.track,
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
	s.ln = &retryListener{Listener: ln, log: s.log}
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
	served := make(chan error, 1)
	go func() { served <- s.srv.Serve(s.ln) }()
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

// track keeps the set of open connections. It runs on every state change,
// twice a request, so it locks only when a connection opens or closes.
func (s *Server) track(c net.Conn, state fasthttp.ConnState) {
	switch state {
	case fasthttp.StateNew:
		s.mu.Lock()
		s.conns[c] = struct{}{}
		s.mu.Unlock()
	case fasthttp.StateClosed, fasthttp.StateHijacked:
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
	}
	if s.opts.connState != nil {
		s.opts.connState(c, state)
	}
}

// retryListener waits and retries when Accept fails for want of resources
// (file descriptors, buffers, memory) or a connection aborted before it was
// accepted: fasthttp's Serve returns on any accept error but a timeout, which
// would leave the port bound and unserved. The backoff (5ms doubling to 1s,
// as net/http) keeps a process out of descriptors from spinning; the
// connections wait in the kernel's queue until descriptors are freed.
type retryListener struct {
	net.Listener
	log     logr.Logger
	mu      sync.Mutex
	lastLog time.Time
}

func (l *retryListener) Accept() (net.Conn, error) {
	var delay time.Duration
	for {
		c, err := l.Listener.Accept()
		if err == nil || !retryableAcceptError(err) {
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
