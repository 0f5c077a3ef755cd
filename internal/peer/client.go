package peer

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"github.com/valyala/fasthttp"

	"github.com/linkforge/linkforge/internal/uses"
)

// MaxConnsPerHost caps a client's requests in flight to one holder: it is
// also the most uses one incident of lost answers can spend for nobody
// (each request in flight when the holder's answers stop reaching us may
// have been served there).
const MaxConnsPerHost = 16

// ClientOptions configure the forwarding side.
type ClientOptions struct {
	// Keyring holds the installation's key; until it does, nothing is
	// forwarded.
	Keyring *Keyring
	// AllowLocal admits peer addresses on loopback and link-local
	// networks (tests, and a single machine); by default a reservation
	// naming one is not forwarded to: a peer address is written in status,
	// and requests should not be sent to the node's or the cloud's own
	// endpoints because of it.
	AllowLocal bool
	Log        logr.Logger
	// Clock tells the time (default time.Now; tests).
	Clock func() time.Time
}

// Client forwards uses to the replicas holding them (uses.Forwarder).
type Client struct {
	c    *fasthttp.Client
	opts ClientOptions
}

// NewClient returns a Forwarder over keep-alive connections to each peer.
func NewClient(o ClientOptions) *Client {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	d := &dialer{allowLocal: o.AllowLocal}
	return &Client{opts: o, c: &fasthttp.Client{
		NoDefaultUserAgentHeader: true,
		MaxConnsPerHost:          MaxConnsPerHost,
		MaxConnWaitTimeout:       100 * time.Millisecond,
		MaxIdleConnDuration:      30 * time.Second,
		ReadBufferSize:           1 << 10,
		MaxResponseBodySize:      1 << 10,
		DialTimeout:              d.dial,
	}}
}

var errNoDeadline = errors.New("a forwarded use needs a deadline")

// TakeFrom implements uses.Forwarder. Only an answer with the holder's
// MAC over this request's nonce is believed; anything else is Unreachable
// (or Lost, when the request may have reached the holder).
func (p *Client) TakeFrom(ctx context.Context, to uses.Holder, v uses.LinkVersion) uses.Forwarded {
	key := p.opts.Keyring.Key()
	if key == nil {
		return uses.NotForwarded
	}
	deadline, ok := ctx.Deadline()
	if !ok {
		p.opts.Log.Error(errNoDeadline, "not forwarded", "link", v.Namespace+"/"+v.Name)
		return uses.NotForwarded
	}
	if !ValidAddress(to.Peer) || to.Name == "" {
		p.opts.Log.V(1).Info("not forwarded: not a host:port", "peer", to.Peer, "link", v.Namespace+"/"+v.Name)
		return uses.NotForwarded
	}
	if url.PathEscape(v.Namespace) != v.Namespace || url.PathEscape(v.Code) != v.Code {
		// The MAC covers the path as the server decodes it: a name that
		// escaping changes is not sent (the API admits none).
		return uses.NotForwarded
	}
	req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
	defer fasthttp.ReleaseRequest(req)
	defer fasthttp.ReleaseResponse(resp)
	path := pathPrefix + v.Namespace + "/" + v.Code + "/" + strconv.FormatUint(v.UID, 10)
	nonce, at := newNonce(), unixMillis(p.opts.Clock())
	req.Header.SetMethod(fasthttp.MethodPost)
	req.SetRequestURI("http://" + to.Peer + path)
	req.Header.Set(headerTo, to.Name)
	req.Header.Set(headerNonce, nonce)
	req.Header.Set(headerTime, at)
	req.Header.Set(headerMAC, key.requestMAC(to.Name, nonce, at, path))
	if err := p.c.DoDeadline(req, resp, deadline); err != nil {
		p.opts.Log.V(1).Info("cannot forward a use", "peer", to.Peer, "holder", to.Name, "link", v.Namespace+"/"+v.Name, "error", err.Error())
		switch {
		case errors.Is(err, fasthttp.ErrNoFreeConns):
			// Our own connections to the holder are all busy: not the
			// holder's fault, so it is not asked to return.
			return uses.NotForwarded
		case sent(err):
			return uses.Lost
		}
		return uses.Unreachable
	}
	result := string(resp.Header.Peek(headerUse))
	if !key.verify(resp.Header.Peek(headerMAC), key.answerMAC(to.Name, nonce, path, result)) {
		p.opts.Log.V(1).Info("an unauthenticated answer: not believed", "peer", to.Peer, "holder", to.Name, "status", resp.StatusCode())
		return uses.Unreachable
	}
	switch {
	case result == Served.String() && resp.StatusCode() == results[Served].status:
		return uses.ForwardServed
	case result == Gone.String():
		return uses.ForwardGone
	}
	return uses.ForwardRefused
}

// sent reports whether a failed request may have reached the peer: its
// answer timed out or the connection broke after it was written. A
// refused or unroutable connection, or no free connection, sent nothing.
func sent(err error) bool {
	var op *net.OpError
	switch {
	case errors.Is(err, fasthttp.ErrDialTimeout):
		return false
	case errors.As(err, &op) && op.Op == "dial":
		return false
	case errors.Is(err, errLocalAddress):
		return false
	}
	return true
}
