package redirect

import (
	"strings"
	"time"

	"github.com/linkforge/linkforge/internal/uses"
)

// answer is what the redirect port answers to one request.
type answer struct {
	resp *canned
	// cacheControl is the Cache-Control value.
	cacheControl string
	// location is the Location of a redirect (resp.status is 3xx).
	location string
	// retryAfter is the Retry-After value of a 503.
	retryAfter string
}

// redirect reports whether the answer carries a Location.
func (a *answer) redirect() bool { return a.resp.status/100 == 3 }

// requestClock tells when a request arrived; answer reads it only for a
// link whose answer depends on the time (an expiry, a tombstone, maxUses),
// so a plain redirect costs no clock read.
type requestClock interface{ Time() time.Time }

// answer decides the response to method host path?rawQuery, received at
// the time at tells: 405 (with Allow) for anything but GET and HEAD, 503 (with
// Retry-After) until the index is synced, then the link's redirect, 410 or
// 404. path is the decoded path (url.URL.Path); host the request's host.
// It neither keeps nor returns any of its string arguments, so a caller
// may pass strings that alias a buffer it reuses afterwards.
func (r *Redirector) answer(method, host, path, rawQuery string, at requestClock) answer {
	if method != "GET" && method != "HEAD" {
		return answer{resp: respBadMethod, cacheControl: ccNoStore}
	}
	if !r.Ready() {
		return answer{resp: respUnavailable, cacheControl: ccNoStore, retryAfter: hdrRetry}
	}
	ns, code, ok := r.routePath(host, path)
	if !ok {
		return answer{resp: respNotFound, cacheControl: ccNoStore}
	}
	e := r.index.Lookup(ns, code)
	if e == nil {
		return answer{resp: respNotFound, cacheControl: ccNoStore}
	}
	var start time.Time
	var now int64
	if e.flags&(flagTombstone|flagExpires|flagMaxUses) != 0 {
		start = at.Time()
		now = start.UnixNano()
		if r.clock != nil {
			now = r.clock.Now().UnixNano()
		}
	}
	if e.is(flagTombstone) {
		if now < e.until {
			return answer{resp: respGone, cacheControl: ccNoStore}
		}
		return answer{resp: respNotFound, cacheControl: ccNoStore}
	}
	if e.gone(now) {
		return answer{resp: respGone, cacheControl: ccNoStore}
	}
	if method == "GET" && r.opts.Uses != nil && e.counter != nil {
		// A use: a GET answered with a redirect. HEAD (link unfurlers) is not.
		if !e.is(flagMaxUses) {
			r.opts.Uses.Count(e.counter)
		} else {
			switch r.opts.Uses.Take(e.counter, start) {
			case uses.Exhausted:
				return answer{resp: respGone, cacheControl: ccNoStore}
			case uses.Unavailable:
				return answer{resp: respNoQuota, cacheControl: ccNoStore, retryAfter: retryAfterSeconds(e.counter.RetryAfter())}
			}
		}
	}
	return answer{resp: redirectResponse(e.Status()), cacheControl: cacheControl(e, now), location: e.target(rawQuery)}
}

// routePath splits a request path into namespace and code: /<namespace>/<code>
// on any host, or /<code> on a host a namespace claims.
func (r *Redirector) routePath(host, p string) (ns, code string, ok bool) {
	if len(p) < 2 || p[0] != '/' {
		return "", "", false
	}
	rest := p[1:]
	if i := strings.IndexByte(rest, '/'); i >= 0 {
		ns, code = rest[:i], rest[i+1:]
		if ns == "" || code == "" || strings.IndexByte(code, '/') >= 0 {
			return "", "", false
		}
		return ns, code, true
	}
	ns, ok = r.domains.Lookup(host)
	return ns, rest, ok
}
