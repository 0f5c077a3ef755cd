package redirect

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/go-logr/logr"
	"github.com/valyala/fasthttp"

	"github.com/linkforge/linkforge/internal/uses"
)

// The peer port: the replicas ask each other for uses of limited links
// there. A click on a replica without quota for a link that another
// replica holds (the reservation names its peer address) is forwarded
// there and served from that quota (uses.Forwarder), at the cost of a round
// trip inside the cluster instead of a status write, which cannot be
// granted anyway while the other replica holds the quota.
//
// A peer request is POST /v1/uses/<namespace>/<code>/<uid>, with no body.
// The answer is 204 with the header Linkforge-Use: served (served: the use
// is counted here), 409 (no quota here), 410 (the link does not answer: not
// active, expired or used up) or 404 (no such link, or another object
// under its code). It can do nothing a click cannot: it takes a use of a
// link that answers, and only from quota this replica holds. The client
// takes nothing but that 204 and header for a use served: a pod that got a
// killed replica's IP and answers 204 to anything serves nobody's quota.

// peerPathPrefix begins every peer request's path.
const peerPathPrefix = "/v1/uses/"

// peerServedHeader marks a peer's answer that it served the use.
const peerServedHeader, peerServed = "Linkforge-Use", "served"

// PeerServerOptions bound the peer port's clients.
type PeerServerOptions struct {
	// Timeout is how long a connection may take to send a request, and a
	// response to be written (default 5s).
	Timeout time.Duration
	// IdleTimeout closes a keep-alive connection idle this long (default 90s).
	IdleTimeout time.Duration
	// MaxConnections caps the connections served at once (default 1,000).
	MaxConnections int
}

// PeerServer is the peer port. It is a manager Runnable.
type PeerServer struct {
	ln  net.Listener
	srv *fasthttp.Server
}

// ListenPeers binds the peer port: a port in use fails the start, and the
// bound address (port 0 picks one) is known before counting starts.
func ListenPeers(addr string) (net.Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("peer port: %w", err)
	}
	return ln, nil
}

// NewPeerServer serves r's peer requests on ln.
func NewPeerServer(ln net.Listener, r *Redirector, o PeerServerOptions) *PeerServer {
	if o.Timeout <= 0 {
		o.Timeout = 5 * time.Second
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = 90 * time.Second
	}
	if o.MaxConnections <= 0 {
		o.MaxConnections = 1000
	}
	return &PeerServer{ln: ln, srv: &fasthttp.Server{
		Handler:      r.handlePeer,
		ErrorHandler: serveError,
		ReadTimeout:  o.Timeout,
		WriteTimeout: o.Timeout,
		IdleTimeout:  o.IdleTimeout,
		// A peer request is a request line and a few headers.
		ReadBufferSize:     1 << 10,
		MaxRequestBodySize: 1,
		Concurrency:        o.MaxConnections,
		// A peer opens at most 64 (PeerClient); one client cannot take all.
		MaxConnsPerIP:                128,
		DisablePreParseMultipartForm: true,
		NoDefaultServerHeader:        true,
		NoDefaultContentType:         true,
		NoDefaultDate:                true,
		CloseOnShutdown:              true,
		SecureErrorLogMessage:        true,
		Logger:                       fasthttpLogger{r.log.WithName("peers")},
	}}
}

// NeedLeaderElection is false: every replica answers its peers.
func (*PeerServer) NeedLeaderElection() bool { return false }

// Start serves until ctx ends, then stops within a second: a peer whose
// request is cut off counts the use as not served.
func (s *PeerServer) Start(ctx context.Context) error {
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

// handlePeer answers a peer request (see the top of this file).
func (r *Redirector) handlePeer(ctx *fasthttp.RequestCtx) {
	if !ctx.IsPost() {
		ctx.Response.Header.Set("Allow", "POST")
		ctx.SetStatusCode(fasthttp.StatusMethodNotAllowed)
		return
	}
	ns, code, uid, ok := parsePeerPath(ctx.Path())
	if !ok {
		ctx.SetStatusCode(fasthttp.StatusBadRequest)
		return
	}
	e := r.index.Lookup(ns, code)
	if e == nil || e.counter == nil || e.uid != uid || !e.is(flagMaxUses) || r.opts.Uses == nil {
		ctx.SetStatusCode(fasthttp.StatusNotFound)
		return
	}
	at := r.now()
	if !e.answersNow(at.UnixNano()) {
		ctx.SetStatusCode(fasthttp.StatusGone)
		return
	}
	if !r.opts.Uses.TakeHeld(e.counter, at) {
		ctx.SetStatusCode(fasthttp.StatusConflict)
		return
	}
	ctx.Response.Header.Set(peerServedHeader, peerServed)
	ctx.SetStatusCode(fasthttp.StatusNoContent)
}

// parsePeerPath splits /v1/uses/<ns>/<code>/<uid>.
func parsePeerPath(p []byte) (ns, code string, uid uint64, ok bool) {
	rest, found := bytes.CutPrefix(p, []byte(peerPathPrefix))
	if !found {
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

// PeerClient forwards uses to the replicas holding them (uses.Forwarder).
type PeerClient struct {
	c   *fasthttp.Client
	log logr.Logger
}

// NewPeerClient returns a Forwarder over keep-alive connections to each peer.
func NewPeerClient(log logr.Logger) *PeerClient {
	return &PeerClient{log: log, c: &fasthttp.Client{
		NoDefaultUserAgentHeader: true,
		MaxConnsPerHost:          64,
		MaxConnWaitTimeout:       100 * time.Millisecond,
		MaxIdleConnDuration:      30 * time.Second,
		ReadBufferSize:           1 << 10,
		MaxResponseBodySize:      1 << 10,
	}}
}

var errNoDeadline = errors.New("a forwarded use needs a deadline")

// TakeFrom implements uses.Forwarder.
func (p *PeerClient) TakeFrom(ctx context.Context, peer string, v uses.LinkVersion) bool {
	deadline, ok := ctx.Deadline()
	if !ok {
		p.log.Error(errNoDeadline, "not forwarded", "link", v.Namespace+"/"+v.Name)
		return false
	}
	if !ValidPeerAddress(peer) {
		p.log.V(1).Info("not forwarded: not a host:port", "peer", peer, "link", v.Namespace+"/"+v.Name)
		return false
	}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI("http://" + peer + peerPathPrefix + url.PathEscape(v.Namespace) + "/" + url.PathEscape(v.Code) + "/" + strconv.FormatUint(v.UID, 10))
	if err := p.c.DoDeadline(req, resp, deadline); err != nil {
		p.log.V(1).Info("cannot forward a use", "peer", peer, "link", v.Namespace+"/"+v.Name, "error", err.Error())
		return false
	}
	return resp.StatusCode() == fasthttp.StatusNoContent && string(resp.Header.Peek(peerServedHeader)) == peerServed
}

// peerHostRune reports whether the API's pattern for peer admits c in a host.
func peerHostRune(c rune) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	}
	return strings.ContainsRune("._:-", c)
}

// ValidPeerAddress reports whether addr is a host:port and nothing more, so that a
// peer address in status names a host and port, never a path or a user.
func ValidPeerAddress(addr string) bool {
	host, port, err := net.SplitHostPort(addr)
	if err != nil || host == "" || len(addr) > 261 {
		return false
	}
	for _, c := range host {
		if !peerHostRune(c) {
			return false
		}
	}
	n, err := strconv.ParseUint(port, 10, 16)
	return err == nil && n > 0
}
