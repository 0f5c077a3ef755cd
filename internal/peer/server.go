package peer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
)

// pathPrefix begins every request's path.
const pathPrefix = "/v1/uses/"

// Result is a holder's answer to a forwarded use.
type Result int

const (
	Served  Result = iota // 204: served from the holder's quota, and counted there
	Refused               // 409: no quota there
	Gone                  // 410: the link does not answer (expired, used up)
	Unknown               // 404: no such link, or another object under its code
)

var results = [...]struct {
	status int
	name   string
}{
	Served:  {fasthttp.StatusNoContent, "served"},
	Refused: {fasthttp.StatusConflict, "refused"},
	Gone:    {fasthttp.StatusGone, "gone"},
	Unknown: {fasthttp.StatusNotFound, "unknown"},
}

func (r Result) String() string { return results[r].name }

// Taker serves forwarded uses: the redirector.
type Taker interface {
	// TakeForPeer serves one use of the link ns/code, if it is the object
	// uid (uses.UIDKey), from this replica's quota: Served, or why not.
	TakeForPeer(ns, code string, uid uint64) Result
}

// ServerOptions configure the peer port.
type ServerOptions struct {
	// Keyring holds the installation's key; until it does, every request
	// is answered 503 (the forwarder reserves instead).
	Keyring *Keyring
	// Holder is this replica's name in status.useReservations: it serves
	// requests addressed to it only.
	Holder string
	// MaxSkew is how far a request's time may be from this replica's
	// clock (default 30s): a request is fresh within it, and refused when
	// seen again within twice it.
	MaxSkew time.Duration
	// Timeout is how long a connection may take to send a request, and a
	// response to be written (default 5s).
	Timeout time.Duration
	// IdleTimeout closes a keep-alive connection idle this long (default 35s).
	IdleTimeout time.Duration
	// MaxConnections caps the connections served at once (default 1,000).
	MaxConnections int
	Log            logr.Logger
	Registry       prometheus.Registerer
	// Clock tells the time (default time.Now; tests).
	Clock func() time.Time
}

// Server is the peer port. It is a manager Runnable.
type Server struct {
	ln       net.Listener
	srv      *fasthttp.Server
	taker    Taker
	opts     ServerOptions
	replays  *replays
	requests *prometheus.CounterVec
}

// Listen binds the peer port: a port in use fails the start, and the
// bound address (port 0 picks one) is known before counting starts.
func Listen(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("peer port: %w", err)
	}
	return ln, nil
}

// NewServer serves t's uses to the peers on ln.
func NewServer(ln net.Listener, t Taker, o ServerOptions) *Server {
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.IdleTimeout <= 0 {
		// Past the clients' 30 s: they close first, and a connection
		// nobody uses holds no slot for long.
		o.IdleTimeout = 35 * time.Second
	}
	if o.MaxConnections <= 0 {
		o.MaxConnections = 1000
	}
	if o.MaxSkew <= 0 {
		o.MaxSkew = 30 * time.Second
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	s := &Server{ln: ln, taker: t, opts: o, replays: newReplays(2*o.MaxSkew, o.Clock()),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: "linkforge", Subsystem: "redirector",
			Name: "peer_requests_total",
			Help: "Requests on the peer port, by result: served, refused, gone, unknown, or why they were not taken: unauthenticated (no or a wrong MAC), misaddressed (for another holder), stale (its time is past the skew allowed), replayed, no-key (this replica has not read the peer key yet), bad-request."},
			[]string{"result"}),
	}
	if o.Registry != nil {
		o.Registry.MustRegister(s.requests)
	}
	s.srv = &fasthttp.Server{
		Handler:      s.handle,
		ErrorHandler: serveError,
		ReadTimeout:  o.Timeout, WriteTimeout: o.Timeout, IdleTimeout: o.IdleTimeout,
		// A request is a request line and a few headers.
		ReadBufferSize:     2 << 10,
		MaxRequestBodySize: 1,
		Concurrency:        o.MaxConnections,
		// A peer opens at most MaxConnsPerHost (Client); one cannot take all.
		MaxConnsPerIP:                2 * MaxConnsPerHost,
		DisablePreParseMultipartForm: true,
		NoDefaultServerHeader:        true,
		NoDefaultContentType:         true,
		NoDefaultDate:                true,
		CloseOnShutdown:              true,
		SecureErrorLogMessage:        true,
		Logger:                       fasthttpLogger{o.Log},
	}
	return s
}

// serveError answers a request fasthttp could not read: 431 for a head
// past the buffer, 413 for a body, 408 for a timeout, else 400.
func serveError(ctx *fasthttp.RequestCtx, err error) {
	status := fasthttp.StatusBadRequest
	var small *fasthttp.ErrSmallBuffer
	var netErr net.Error
	switch {
	case errors.As(err, &small):
		status = fasthttp.StatusRequestHeaderFieldsTooLarge
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		status = fasthttp.StatusRequestEntityTooLarge
	case errors.As(err, &netErr) && netErr.Timeout():
		status = fasthttp.StatusRequestTimeout
	}
	ctx.Response.Reset()
	ctx.SetConnectionClose()
	ctx.SetStatusCode(status)
}

type fasthttpLogger struct{ log logr.Logger }

func (l fasthttpLogger) Printf(format string, args ...any) {
	l.log.V(1).Info(fmt.Sprintf(format, args...))
}

// NeedLeaderElection is false: every replica answers its peers.
func (*Server) NeedLeaderElection() bool { return false }

// Start serves until ctx ends, then stops within a second: a peer whose
// request is cut off counts the use as not served.
func (s *Server) Start(ctx context.Context) error {
	served := make(chan error, 1)
	go func() { served <- s.srv.Serve(s.ln) }()
	select {
	case err := <-served:
		return err
	case <-ctx.Done():
	}
	stop, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	_ = s.srv.ShutdownWithContext(stop)
	_ = s.ln.Close()
	return <-served
}

// handle answers a request (see the package doc). Refusals before the
// request is authenticated carry no MAC: the forwarder treats them as an
// unreachable holder.
func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	if !ctx.IsPost() {
		ctx.Response.Header.Set("Allow", "POST")
		s.refuse(ctx, fasthttp.StatusMethodNotAllowed, "bad-request")
		return
	}
	path := ctx.Path()
	ns, code, uid, ok := parsePath(path)
	if !ok {
		s.refuse(ctx, fasthttp.StatusBadRequest, "bad-request")
		return
	}
	key := s.opts.Keyring.Key()
	if key == nil {
		s.refuse(ctx, fasthttp.StatusServiceUnavailable, "no-key")
		return
	}
	h := &ctx.Request.Header
	to, nonce, at := string(h.Peek(headerTo)), string(h.Peek(headerNonce)), string(h.Peek(headerTime))
	if nonce == "" || len(nonce) > 64 || !key.verify(h.Peek(headerMAC), key.requestMAC(to, nonce, at, string(path))) {
		s.refuse(ctx, fasthttp.StatusUnauthorized, "unauthenticated")
		return
	}
	if to != s.opts.Holder {
		// For a replica that had this address before: this one holds
		// none of its quota.
		s.refuse(ctx, fasthttp.StatusMisdirectedRequest, "misaddressed")
		return
	}
	now := s.opts.Clock()
	ms, err := strconv.ParseInt(at, 10, 64)
	if skew := now.Sub(time.UnixMilli(ms)); err != nil || skew > s.opts.MaxSkew || skew < -s.opts.MaxSkew {
		s.refuse(ctx, fasthttp.StatusUnauthorized, "stale")
		return
	}
	// The memory turns on the wall clock, as the skew is judged: a clock
	// stepped back cannot reopen a window.
	if !s.replays.first(string(h.Peek(headerMAC)), now.Round(0)) {
		s.refuse(ctx, fasthttp.StatusUnauthorized, "replayed")
		return
	}
	r := s.taker.TakeForPeer(ns, code, uid)
	s.requests.WithLabelValues(r.String()).Inc()
	ctx.Response.Header.Set(headerUse, r.String())
	ctx.Response.Header.Set(headerMAC, key.answerMAC(s.opts.Holder, nonce, string(path), r.String()))
	ctx.SetStatusCode(results[r].status)
}

// refuse answers without a MAC and closes the connection: a client that
// is refused holds none of the port's connections.
func (s *Server) refuse(ctx *fasthttp.RequestCtx, status int, why string) {
	s.requests.WithLabelValues(why).Inc()
	ctx.SetConnectionClose()
	ctx.SetStatusCode(status)
}

// parsePath splits /v1/uses/<ns>/<code>/<uid>. Namespaces and codes hold
// no '/' and no newline (the MAC's separator): the API admits neither.
func parsePath(p []byte) (ns, code string, uid uint64, ok bool) {
	rest, found := bytes.CutPrefix(p, []byte(pathPrefix))
	if !found || bytes.ContainsAny(rest, "\n\r") {
		return "", "", 0, false
	}
	parts := bytes.Split(rest, []byte("/"))
	if len(parts) != 3 || len(parts[0]) == 0 || len(parts[1]) == 0 {
		return "", "", 0, false
	}
	uid, err := strconv.ParseUint(string(parts[2]), 10, 64)
	if err != nil {
		return "", "", 0, false
	}
	return string(parts[0]), string(parts[1]), uid, true
}
