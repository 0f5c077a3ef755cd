package redirect

import (
	"time"

	"github.com/linkforge/linkforge/internal/uses"
)

// methodHead is HEAD, which gets the headers of an answer: nothing is
// drawn or rendered for it.
const methodHead = "HEAD"

// answer is what the redirect port answers to one request.
type answer struct {
	resp *canned
	// cacheControl is the Cache-Control value.
	cacheControl string
	// location is the Location of a redirect (resp.status is 3xx).
	location string
	// retryAfter is the Retry-After value of a 503.
	retryAfter string
	// body and contentType, when set, replace resp's body and text/plain
	// (a QR code, a preview page); extra are more headers.
	body        []byte
	contentType string
	extra       []header
}

// header is a response header, its name as fasthttp sends it.
type header struct {
	key   []byte
	value string
}

// redirect reports whether the answer carries a Location.
func (a *answer) redirect() bool { return a.resp.status/100 == 3 }

// requestClock tells when a request arrived; answer reads it only for a
// link whose answer depends on the time (an expiry, an activation, a
// tombstone, maxUses), so a plain redirect costs no clock read.
type requestClock interface{ Time() time.Time }

// answer decides the response to method host path?rawQuery, received at
// the time at tells: 405 (with Allow) for anything but GET and HEAD, 503 (with
// Retry-After) until the index is synced, then the link's redirect, QR code
// or preview, 410 or 404 (or a fallback redirect instead of those). path is
// the decoded path (url.URL.Path); host the request's host.
// It neither keeps nor returns any of its string arguments, so a caller
// may pass strings that alias a buffer it reuses afterwards.
func (r *Redirector) answer(method, host, path, rawQuery string, at requestClock) answer {
	if method != "GET" && method != methodHead {
		return answer{resp: respBadMethod, cacheControl: ccNoStore}
	}
	if !r.Ready() {
		return answer{resp: respUnavailable, cacheControl: ccNoStore, retryAfter: hdrRetry}
	}
	rt := r.route(host, path)
	if !rt.ok {
		if rt.root {
			return r.fallback(fallbackRoot, rt.ns, respNotFound)
		}
		return r.fallback(fallbackNotFound, rt.ns, respNotFound)
	}
	e := r.index.Lookup(rt.ns, rt.code)
	if e == nil {
		return r.notFound(rt)
	}
	var start time.Time
	var now int64
	if e.flags&(flagTombstone|flagExpires|flagMaxUses|flagActivates) != 0 {
		start = at.Time()
		now = start.UnixNano()
		if r.clock != nil {
			now = r.clock.Now().UnixNano()
		}
	}
	if e.waiting(now) {
		return r.notFound(rt) // not active yet: as an unknown code
	}
	if e.is(flagTombstone) {
		if now >= e.until {
			return r.notFound(rt)
		}
		return r.gone(rt, e, method, path, now)
	}
	if e.gone(now) {
		return r.gone(rt, e, method, path, now)
	}
	switch rt.view {
	case viewQR:
		return r.qrAnswer(rt, e, host, rawQuery, method == methodHead, at, now)
	case viewPreview:
		return r.previewAnswer(rt, path[:len(path)-1], e, method == methodHead, now)
	}
	if method == "GET" && r.opts.Uses != nil && e.counter != nil {
		// A use: a GET answered with a redirect. HEAD (link unfurlers) is not.
		if !e.is(flagMaxUses) {
			r.opts.Uses.Count(e.counter)
		} else {
			switch r.opts.Uses.Take(e.counter, start) {
			case uses.Exhausted:
				return r.gone(rt, e, method, path, now)
			case uses.Unavailable:
				return answer{resp: respNoQuota, cacheControl: ccNoStore, retryAfter: retryAfterSeconds(e.counter.RetryAfter())}
			}
		}
	}
	return answer{resp: redirectResponse(e.Status()), cacheControl: cacheControl(e, now), location: e.target(rawQuery)}
}

// notFound answers a request for a link that does not answer (unknown, not
// active yet, or a tombstone that ended): 404, or the not-found fallback of
// its namespace for a redirect.
func (r *Redirector) notFound(rt route) answer {
	if rt.view != viewRedirect {
		return answer{resp: respNotFound, cacheControl: ccNoStore}
	}
	return r.fallback(fallbackNotFound, rt.ns, respNotFound)
}

// gone answers a request for an expired or exhausted link: 410, or the gone
// fallback of its namespace for a redirect; the preview page says so.
func (r *Redirector) gone(rt route, e *Link, method, path string, now int64) answer {
	switch rt.view {
	case viewPreview:
		return r.previewAnswer(rt, path[:len(path)-1], e, method == methodHead, now)
	case viewQR:
		return answer{resp: respGone, cacheControl: ccNoStore}
	}
	return r.fallback(fallbackGone, rt.ns, respGone)
}

// fallback redirects to the fallback of kind k of namespace ns (else the
// redirector's default), or answers otherwise when there is none.
func (r *Redirector) fallback(k fallbackKind, ns string, otherwise *canned) answer {
	loc := r.fallbackLocation(k, ns)
	if loc == "" {
		return answer{resp: otherwise, cacheControl: ccNoStore}
	}
	r.metrics.fallbacks[k].Inc()
	// A link may appear under the code: the fallback is never cached.
	return answer{resp: resp302, cacheControl: ccNoStore, location: loc}
}

// fallbackLocation is the Location of namespace ns's fallback of kind k,
// else the redirector's default, else "".
func (r *Redirector) fallbackLocation(k fallbackKind, ns string) string {
	if loc := r.fallbacks.lookup(ns, k); loc != "" {
		return loc
	}
	return r.opts.Fallbacks[k]
}
