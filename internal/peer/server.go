package peer

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"
	"golang.org/x/time/rate"

	"github.com/linkforge/linkforge/internal/uses"
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

	// The holder's refusals of a request with a valid MAC, which it
	// answers with its own (a Taker never returns them).
	Busy         // 503: its replay memory is full; nothing taken
	Misaddressed // 421: the request is for another holder (this one got its address)
	Stale        // 401: the request's time is beyond MaxSkew of this holder's clock
)

var results = [...]struct {
	status int
	name   string
}{
	Served:       {fasthttp.StatusNoContent, "served"},
	Refused:      {fasthttp.StatusConflict, "refused"},
	Gone:         {fasthttp.StatusGone, "gone"},
	Unknown:      {fasthttp.StatusNotFound, "unknown"},
	Busy:         {fasthttp.StatusServiceUnavailable, "busy"},
	Misaddressed: {fasthttp.StatusMisdirectedRequest, "misaddressed"},
	Stale:        {fasthttp.StatusUnauthorized, "stale"},
}

// The peer port's metric names: linkforge_redirector_peer_*.
const (
	metricsNamespace = "linkforge"
	metricsSubsystem = "redirector"
)

// The results of requests refused without a MAC (requests_total's labels).
const (
	labelUnauthenticated = "unauthenticated"
	labelReplayed        = "replayed"
	labelNoKey           = "no-key"
	labelBadRequest      = "bad-request"
)

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
	// Timeout is how long a new connection may take to send its whole
	// first request, and an answer to be written (default FirstByteTimeout).
	Timeout time.Duration
	// IdleTimeout closes a keep-alive connection idle this long (default 35s).
	IdleTimeout time.Duration
	// MaxConnections caps the connections served at once (default
	// DefaultMaxConnections).
	MaxConnections int
	// MaxConnectionsPerAddress caps those of one client address (default
	// DefaultMaxConnectionsPerAddress).
	MaxConnectionsPerAddress int
	Log                      logr.Logger
	Registry                 prometheus.Registerer
	// Clock tells the time (default time.Now; tests).
	Clock func() time.Time
}

// The peer port's limits. Nothing but a forwarder needs it, and a client
// without the key gets nothing from it, so the limits are what keeps such
// clients from holding it:
//
//   - FirstByteTimeout: a forwarder writes its request as soon as it has
//     connected, and gives up uses.ForwardTimeout (500 ms) after it
//     started, so a genuine first request never needs longer; twice that
//     is slack for a loaded node. A connection that sends nothing (or not
//     a whole request) holds its slot that long, not 5 s as before; one
//     refused is closed at once, so a client without the key keeps no
//     connection beyond it.
//   - DefaultMaxConnectionsPerAddress: a forwarder opens at most
//     MaxConnsPerHost (16) connections to a holder; when a slow holder
//     makes them time out it opens as many again while the holder's
//     handlers still hold the old ones: twice. On a pod network an
//     address is one pod (pod-to-pod traffic is not NATed), so this is
//     what one replica needs, and what one pod without the key can hold.
//   - DefaultMaxConnections: 128 addresses at their limit. 32 pods without
//     the key hold at most 1,024 of them (the 1,000 before were full with
//     ~32), leaving 3,072, 96 replicas at their own limit. A silent
//     connection costs the holder about 9.5 KB (a goroutine and its
//     buffers, measured), so the cap costs at most ~40 MB.
const (
	FirstByteTimeout                = 2 * uses.ForwardTimeout
	DefaultMaxConnectionsPerAddress = 2 * MaxConnsPerHost
	DefaultMaxConnections           = 128 * DefaultMaxConnectionsPerAddress
)

// Server is the peer port. It is a manager Runnable.
type Server struct {
	ln       net.Listener
	srv      *fasthttp.Server
	taker    Taker
	opts     ServerOptions
	replays  *replays
	requests *prometheus.CounterVec
	offsets  prometheus.Histogram
	// staleLog lets one line in 10 s name a peer whose requests are
	// stale; stale counts them meanwhile.
	staleLog rate.Sometimes
	stale    atomic.Int64
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
		o.Timeout = FirstByteTimeout
	}
	if o.IdleTimeout <= 0 {
		// Past the clients' 30 s: they close first, and a connection
		// nobody uses holds no slot for long.
		o.IdleTimeout = 35 * time.Second
	}
	if o.MaxConnections <= 0 {
		o.MaxConnections = DefaultMaxConnections
	}
	if o.MaxConnectionsPerAddress <= 0 {
		o.MaxConnectionsPerAddress = DefaultMaxConnectionsPerAddress
	}
	if o.MaxSkew <= 0 {
		o.MaxSkew = 30 * time.Second
	}
	if o.Clock == nil {
		o.Clock = time.Now
	}
	s := &Server{ln: ln, taker: t, opts: o, replays: newReplays(o.MaxSkew, o.Clock()),
		staleLog: rate.Sometimes{Interval: staleLogEvery},
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNamespace, Subsystem: metricsSubsystem,
			Name: "peer_requests_total",
			Help: "Requests on the peer port, by result: served, refused, gone, unknown, or why they were not taken: unauthenticated (no or a wrong MAC), misaddressed (for another holder), stale (its time is past the skew allowed from this replica's clock: a clock off, or a request replayed late), replayed, busy (the replay memory is full), no-key (this replica has not read the peer key yet), bad-request."},
			[]string{"result"}),
		offsets: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: metricsNamespace, Subsystem: metricsSubsystem,
			Name: "peer_clock_offset_seconds",
			Help: "How far the time of the peer port's authenticated requests was from this replica's clock, either way: the skew between the nodes' clocks (and the requests' transit). Past the skew allowed (30s), requests are refused as stale.",
			// Up to and past the 30 s allowed.
			Buckets: []float64{.01, .1, .5, 1, 2, 5, 10, 20, 30, 60, 300}}),
	}
	// Every label exists from the start, at 0: alerts need no first event.
	for _, r := range results {
		s.requests.WithLabelValues(r.name)
	}
	for _, l := range []string{labelUnauthenticated, labelReplayed, labelNoKey, labelBadRequest} {
		s.requests.WithLabelValues(l)
	}
	if o.Registry != nil {
		o.Registry.MustRegister(s.requests, s.offsets)
	}
	s.srv = &fasthttp.Server{
		Handler:      s.handle,
		ErrorHandler: serveError,
		// ReadTimeout runs from a new connection's start to the end of its
		// first request (the first byte included); IdleTimeout is the wait
		// for a keep-alive connection's next first byte, after which
		// ReadTimeout runs again (fasthttp's serveConn).
		ReadTimeout: o.Timeout, WriteTimeout: o.Timeout, IdleTimeout: o.IdleTimeout,
		// A request is a request line and a few headers.
		ReadBufferSize:     2 << 10,
		MaxRequestBodySize: 1,
		// Over either limit, fasthttp answers a new connection 503 or 429
		// and closes it before reading: the forwarder does not take it
		// for an unreachable holder (Client.TakeFrom).
		Concurrency:                  o.MaxConnections,
		MaxConnsPerIP:                o.MaxConnectionsPerAddress,
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
// request is authenticated carry no MAC (and close the connection); once
// its MAC is valid, the answer carries this holder's, refusals included,
// so that the forwarder tells them from what anyone else could make up.
func (s *Server) handle(ctx *fasthttp.RequestCtx) {
	if !ctx.IsPost() {
		ctx.Response.Header.Set("Allow", "POST")
		s.refuse(ctx, fasthttp.StatusMethodNotAllowed, labelBadRequest)
		return
	}
	path := ctx.Path()
	ns, code, uid, ok := parsePath(path)
	if !ok {
		s.refuse(ctx, fasthttp.StatusBadRequest, labelBadRequest)
		return
	}
	h := &ctx.Request.Header
	to, nonce, at := string(h.Peek(headerTo)), string(h.Peek(headerNonce)), string(h.Peek(headerTime))
	mac := h.Peek(headerMAC)
	// The key the request was signed with, among those accepted now (the
	// previous one too, during a rotation's window); the answer is signed
	// with the same, which is the one the forwarder verifies with.
	key, hasKey := s.opts.Keyring.verifying(func(k *Key) bool {
		return nonce != "" && len(nonce) <= 64 && k.verify(mac, k.requestMAC(to, nonce, at, string(path)))
	})
	if !hasKey {
		s.refuse(ctx, fasthttp.StatusServiceUnavailable, labelNoKey)
		return
	}
	if key == nil {
		s.refuse(ctx, fasthttp.StatusUnauthorized, labelUnauthenticated)
		return
	}
	if to != s.opts.Holder {
		// For a replica that had this address before: this one holds
		// none of its quota.
		s.answer(ctx, key, to, nonce, path, Misaddressed)
		return
	}
	ms, err := strconv.ParseInt(at, 10, 64)
	if err != nil {
		s.refuse(ctx, fasthttp.StatusBadRequest, labelBadRequest)
		return
	}
	v, offset := s.replays.admit(string(mac), time.UnixMilli(ms), s.opts.Clock())
	s.offsets.Observe(offset.Abs().Seconds())
	switch v {
	case stale:
		s.logStale(ctx, offset)
		s.answer(ctx, key, to, nonce, path, Stale)
		return
	case replayed:
		s.refuse(ctx, fasthttp.StatusUnauthorized, labelReplayed)
		return
	case busy:
		s.answer(ctx, key, to, nonce, path, Busy)
		return
	}
	s.answer(ctx, key, to, nonce, path, s.taker.TakeForPeer(ns, code, uid))
}

// answer answers an authenticated request for holder with r, under this
// replica's MAC over the request's nonce and path.
func (s *Server) answer(ctx *fasthttp.RequestCtx, key *Key, holder, nonce string, path []byte, r Result) {
	s.requests.WithLabelValues(r.String()).Inc()
	ctx.Response.Header.Set(headerUse, r.String())
	ctx.Response.Header.Set(headerMAC, key.answerMAC(holder, nonce, string(path), r.String()))
	ctx.SetStatusCode(results[r].status)
}

// staleLogEvery is how often a stale request is logged at most.
const staleLogEvery = 10 * time.Second

// logStale logs a request refused as stale, at most once in staleLogEvery,
// naming the peer that sent it by its address (a pod IP: kubectl get pods
// -o wide) and how far its clock is from ours.
func (s *Server) logStale(ctx *fasthttp.RequestCtx, offset time.Duration) {
	s.stale.Add(1)
	s.staleLog.Do(func() {
		s.opts.Log.Info("refused a peer's request as stale: its time is further from this replica's clock than the skew allowed; its clicks reserve through the API server instead. Fix the clocks (NTP) of both nodes, or it is a request replayed late",
			"peer", ctx.RemoteAddr().String(), "offset", offset.Round(time.Second).String(), "maxSkew", s.opts.MaxSkew.String(),
			"staleSinceLastLine", s.stale.Swap(0))
	})
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
