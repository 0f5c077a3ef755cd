package peer

import (
	"context"
	"errors"
	"net/url"
	"strconv"
	"time"

	"github.com/go-logr/logr"
	"github.com/valyala/fasthttp"
	"golang.org/x/time/rate"

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
	// staleLog lets one line a minute say that a holder refuses our
	// requests' time.
	staleLog rate.Sometimes
}

// NewClient returns a Forwarder over keep-alive connections to each peer.
func NewClient(o ClientOptions) *Client {
	if o.Clock == nil {
		o.Clock = time.Now
	}
	d := &dialer{allowLocal: o.AllowLocal}
	return &Client{opts: o, staleLog: rate.Sometimes{Interval: time.Minute}, c: &fasthttp.Client{
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
// MAC over this request's nonce is believed; what anything else means
// depends on whether the request was written (classify).
func (p *Client) TakeFrom(ctx context.Context, to uses.Holder, v uses.LinkVersion) uses.Forwarded {
	key := p.opts.Keyring.Key()
	if key == nil {
		return uses.NoKey // asked through the API server instead
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
	err := p.c.DoDeadline(req, resp, deadline)
	// fasthttp's transport records the connection's addresses on the
	// response (Response.ParseNetConn) as soon as it holds a connection for
	// this request, before it writes a byte of it; a response without them
	// was never written: the wait for a free connection, or the dial,
	// failed. Everything after may have reached the holder. Pinned by
	// TestWrittenIsTold.
	a := answer{err: err, written: resp.RemoteAddr() != nil}
	if err == nil {
		a.status = resp.StatusCode()
		a.result = string(resp.Header.Peek(headerUse))
		a.verified = key.verify(resp.Header.Peek(headerMAC), key.answerMAC(to.Name, nonce, path, a.result))
	}
	got := a.classify()
	switch {
	case err != nil:
		p.opts.Log.V(1).Info("cannot forward a use", "peer", to.Peer, "holder", to.Name, "link", v.Namespace+"/"+v.Name,
			"written", a.written, "result", got.String(), "error", err.Error())
	case !a.verified:
		p.opts.Log.V(1).Info("an unauthenticated answer: not believed", "peer", to.Peer, "holder", to.Name,
			"status", a.status, "result", got.String())
	case a.result == Stale.String():
		p.staleLog.Do(func() {
			p.opts.Log.Info("the holder refuses this replica's requests as stale: its clock and this one's are further apart than the skew allowed (30s by default); its reservations are asked back through the API server. Fix the clocks (NTP) of both nodes",
				"holder", to.Name, "peer", to.Peer)
		})
	}
	return got
}

// answer is what became of one request, for classify.
type answer struct {
	err      error  // DoDeadline's
	written  bool   // a connection was taken for it: it may have reached the holder
	status   int    // the answer's status line (err == nil)
	result   string // its Linkforge-Use
	verified bool   // its MAC is the holder's over our nonce, the path and result
}

// classify tells what a forward's outcome means for the use and the
// holder (see uses.Forwarded), from the most to the least certain:
//
//   - An answer with a valid MAC says what the holder did: served (only
//     with its 204: a served answer whose status line was changed on the
//     way is lost, not believed), refused, gone, busy (its replay memory
//     is full: not forwarded), or that it cannot take this replica's
//     requests at all (misaddressed: another replica at that address;
//     stale: the clocks are too far apart): unreachable.
//   - Nothing was written (no connection was taken for the request): a
//     failed dial is unreachable (refused, no route, a dial timeout, an
//     address not to be asked); anything else is our own limit (every
//     connection to the holder busy for the whole wait, or the deadline
//     past before it started): not forwarded.
//   - Written, and no answer (a timeout, a broken connection): lost.
//   - Written, and an answer without a valid MAC: a 503 or 429 came
//     before the request was read (fasthttp answers them when it accepts
//     a connection over Server.Concurrency or MaxConnsPerIP, and the
//     holder's 503 without its key serves nothing): not forwarded. Any
//     other (an impostor's 204, a refusal without a MAC, a MAC changed on
//     the way) is lost: the holder may have served the request. An
//     attacker on the path can make a served answer read as a 503; it
//     can drop it anyway.
func (a answer) classify() uses.Forwarded {
	switch {
	case a.err == nil && a.verified:
		switch a.result {
		case Served.String():
			if a.status == results[Served].status {
				return uses.ForwardServed
			}
		case Refused.String(), Unknown.String():
			return uses.ForwardRefused
		case Gone.String():
			return uses.ForwardGone
		case Busy.String():
			return uses.NotForwarded
		case Misaddressed.String(), Stale.String():
			return uses.Unreachable
		}
		return uses.Lost
	case !a.written:
		var dial *dialError
		if errors.As(a.err, &dial) {
			return uses.Unreachable
		}
		return uses.NotForwarded
	case a.err != nil:
		return uses.Lost
	case a.status == fasthttp.StatusServiceUnavailable || a.status == fasthttp.StatusTooManyRequests:
		return uses.NotForwarded
	}
	return uses.Lost
}
