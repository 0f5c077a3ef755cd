package redirect

import (
	"net/netip"
	"time"

	"github.com/linkforge/linkforge/internal/agent"
	"github.com/linkforge/linkforge/internal/uses"
)

// methodHead is HEAD, which gets the headers of an answer: nothing is
// drawn or rendered for it; methodGet is GET, the method of a use.
const (
	methodHead = "HEAD"
	methodGet  = "GET"
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
	// body and contentType, when set, replace resp's body and text/plain
	// (a QR code, a preview page); extra are more headers.
	body        []byte
	contentType string
	extra       []header
	// click is what the request was for its click event (handler.click),
	// link the link that answered it (nil for an orphan), and target the
	// link's chosen URL without the query it may forward ("" when
	// location is that already): carried out of answer so that the event
	// neither routes nor looks the link up again.
	click  clickKind
	chosen choice
	// gatePassed says that the request passed the gate of link, a gated
	// link (gate.go): its event says gatePassed (clicks.go).
	gatePassed bool
	link       *Link
	target     string
	// client is the client's address if answering it read it (a split
	// reads it), so that the request reads it once (Redirector.client).
	client netip.Addr
}

// choice is the rule and the variant of a routed link that chose a click's
// target, each as its index plus one (0: none), for the click event.
type choice struct{ rule, variant uint8 }

// clickKind is whether a request is a click (docs/events.md), and of what.
type clickKind uint8

const (
	clickNone   clickKind = iota // no event: "/", the QR code, the preview, 405, 503 before sync
	clickLink                    // the redirect path of a link that answered
	clickOrphan                  // the redirect path of no link (404 or a fallback)
)

// clickOf is a, the answer to a request for link e (nil: none) on route
// rt, marked as the click it is: one of e (or an orphan) on the redirect
// view, none on the others.
func clickOf(a answer, rt route, e *Link) answer {
	if rt.view != viewRedirect {
		return a
	}
	a.click, a.link = clickOrphan, e
	if e != nil {
		a.click = clickLink
	}
	return a
}

// header is a response header, its name as fasthttp sends it.
type header struct {
	key   []byte
	value string
}

// redirect reports whether the answer carries a Location.
func (a *answer) redirect() bool { return a.resp.class == 3 }

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
	if !takesMethod(method) {
		return answer{resp: respBadMethod, cacheControl: ccNoStore}
	}
	if !r.Ready() {
		return answer{resp: respUnavailable, cacheControl: ccNoStore, retryAfter: hdrRetry}
	}
	rt := r.route(host, path)
	var e *Link
	if rt.ok {
		e = r.index.Lookup(rt.ns, rt.code)
	}
	if e == nil && !rt.root {
		// A path that goes on after a code: a link with forwardPath's.
		if frt, fe := r.forwardRoute(host, path); fe != nil {
			rt, e = frt, fe
		}
	}
	if method == methodPost && (e.access() == nil || rt.view != viewRedirect) {
		// Only a gated link's redirect path takes a post: its password.
		return answer{resp: respBadMethod, cacheControl: ccNoStore}
	}
	if !rt.ok {
		if rt.root {
			return r.fallback(fallbackRoot, rt.ns, respNotFound)
		}
		return clickOf(r.fallback(fallbackNotFound, rt.ns, respNotFound), rt, nil)
	}
	if e == nil {
		return clickOf(r.notFound(rt), rt, nil)
	}
	start, now := r.clickTime(e, at)
	if e.waiting(now) {
		return clickOf(r.notFound(rt), rt, e) // not active yet: as an unknown code
	}
	if e.is(flagTombstone) {
		if now >= e.until {
			return clickOf(r.notFound(rt), rt, e)
		}
		return clickOf(r.gone(rt, e, method, host, path, now), rt, e)
	}
	if e.gone(now) {
		return clickOf(r.gone(rt, e, method, host, path, now), rt, e)
	}
	switch rt.view {
	case viewQR:
		return r.qrAnswer(rt, e, host, rawQuery, method == methodHead, at, now)
	case viewPreview:
		return r.previewView(rt, host, path, e, method, at, now)
	}
	// Who asks: a previewer never spends a use (previewerAnswer).
	if c, ok := r.previewerOf(method, e, at); ok {
		return r.previewerAnswer(rt, e, method, rawQuery, at, now, c)
	}
	// A gated link: only whoever passes its gate goes on (gate.go).
	posted, passed := false, false
	var client netip.Addr
	if acc := e.access(); acc != nil {
		a, stop := r.gate(e, acc, method, rt, host, rawQuery, at)
		if stop {
			return a
		}
		// Passed: every answer from here on says so, a gone or a 503 too.
		posted, passed, client = method == methodPost, a.gatePassed, a.client
	}
	// Where the click goes: spec.url, unless the link routes it (rules,
	// variants, a forwarded path); slot is the split's destination, if
	// the click went through the split.
	location, target, slot, chosen := "", e.Location, -1, choice{}
	if e.is(flagRouted) {
		var ok routed
		if location, target, slot, chosen, client, ok = r.routedClick(e, rt, rawQuery, at, now, false); ok != routedOK {
			return r.unrouted(rt, ok, client)
		}
	}
	if method == methodGet || posted {
		switch r.spendUse(e, slot, start) {
		case uses.Exhausted:
			a := clickOf(r.gone(rt, e, method, host, path, now), rt, e)
			a.client, a.gatePassed = client, passed
			return a
		case uses.Unavailable:
			return answer{resp: respNoQuota, cacheControl: ccNoStore, retryAfter: retryAfterSeconds(e.counter.RetryAfter()), click: clickLink, link: e, client: client, gatePassed: passed}
		}
	}
	r.splitClicked(slot, method)
	// As redirectTo does, written out: a call returning an answer copies it.
	if location == "" {
		location = e.target(rawQuery)
	}
	if posted {
		// 303: the browser GETs the destination; a 307 or 308 would post
		// the password on to it.
		return answer{resp: resp303, cacheControl: ccNoStore, location: location, click: clickLink, chosen: chosen, link: e, target: target, client: client, gatePassed: passed}
	}
	return answer{resp: redirectResponse(e.Status()), cacheControl: cacheControl(e, now), location: location,
		click: clickLink, chosen: chosen, link: e, target: target, client: client, gatePassed: passed}
}

// takesMethod says whether the redirect port answers method: GET, HEAD,
// and POST (a gated link's password; answer refuses it elsewhere).
func takesMethod(method string) bool {
	return method == methodGet || method == methodHead || method == methodPost
}

// clickTime is when the request arrived (start) and the time its answer
// is decided at (now, Unix ns), read only for a link whose answer depends
// on the time (an expiry, an activation, a tombstone, maxUses): a plain
// redirect costs no clock read (and this check is inlined).
func (r *Redirector) clickTime(e *Link, at requestClock) (start time.Time, now int64) {
	if e.flags&(flagTombstone|flagExpires|flagMaxUses|flagActivates) == 0 {
		return start, 0
	}
	return r.readClock(at)
}

// readClock is clickTime's reading of the clocks.
func (r *Redirector) readClock(at requestClock) (start time.Time, now int64) {
	start = at.Time()
	now = start.UnixNano()
	if r.clock != nil {
		now = r.clock.Now().UnixNano()
	}
	return start, now
}

// spendUse counts a use of e: a GET (or a gated link's right password)
// answered with a redirect, to anyone but a previewer (HEAD is not one).
// A split click (slot >= 0) is counted first, so the write of its use has
// it. A limited link's use that cannot be taken is not spent: Exhausted
// (its uses are gone) or Unavailable (no quota at hand), which the caller
// answers. It returns a Verdict, not an answer, as the hit path copies
// what a call returns.
func (r *Redirector) spendUse(e *Link, slot int, start time.Time) uses.Verdict {
	if r.opts.Uses == nil || e.counter == nil {
		return uses.Served
	}
	if slot >= 0 {
		e.counter.CountSplit(slot, 1)
	}
	if !e.is(flagMaxUses) {
		r.opts.Uses.Count(e.counter)
		return uses.Served
	}
	v := r.opts.Uses.Take(e.counter, start)
	if v != uses.Served {
		e.counter.CountSplit(slot, -1)
	}
	return v
}

// previewView answers the preview page ("+") of e. The page names the
// destination: a limited link's is for people, and a previewer of its "+"
// URL gets the card (not a click, nor a fetch of the link).
func (r *Redirector) previewView(rt route, host, path string, e *Link, method string, at requestClock, now int64) answer {
	if e.access() != nil {
		// A gated link's destination is for whoever passes its gate: its
		// preview page is its card, for anyone.
		a := r.cardAnswer(e, method == methodHead)
		a.click, a.link = clickNone, nil
		return a
	}
	if _, ok := r.previewerOf(methodGet, e, at); ok && e.is(flagMaxUses) {
		a := r.cardAnswer(e, method == methodHead)
		a.click, a.link = clickNone, nil
		return a
	}
	return r.previewAnswer(rt, host, path[:len(path)-1], e, method == methodHead, now)
}

// previewerOf is the class of the request's client and whether it is a
// previewer (a client that reads links without following them for a
// person, agent.Agent.Reads), asked for every GET and for HEAD of a link
// that may answer with its card. The agent is read from the request's
// User-Agent (remembered); a request without a RequestCtx (tests) reads
// as one without an agent.
func (r *Redirector) previewerOf(method string, e *Link, at requestClock) (agent.Class, bool) {
	if method == methodPost || method != methodGet && !e.is(flagMaxUses|flagCard) && e.access() == nil {
		return agent.Unknown, false // a post is a person's password, whatever its agent
	}
	who := emptyAgent
	if ctx := ctxOf(at); ctx != nil {
		who, _ = r.agentOf(ctx, ctx.Request.Header.UserAgent())
	}
	return who.Class(), who.Reads()
}

// redirectTo is the redirect of link e to location (its target with the
// request's query if "").
func redirectTo(e *Link, location, target, rawQuery string, chosen choice, now int64) answer {
	if location == "" {
		location = e.target(rawQuery)
	}
	return answer{resp: redirectResponse(e.Status()), cacheControl: cacheControl(e, now), location: location,
		click: clickLink, chosen: chosen, link: e, target: target}
}

// previewerAnswer answers a previewer (a client of class c that reads
// links without following them for a person) asking for link e: the
// link's card if it has one or is limited (so a client that lies to be a
// previewer gains nothing), else the redirect to spec.url outside the
// split (rules still apply). Neither is a use: a GET is counted in the
// link's status.previewerFetches instead.
func (r *Redirector) previewerAnswer(rt route, e *Link, method, rawQuery string, at requestClock, now int64, c agent.Class) answer {
	card := e.is(flagMaxUses|flagCard) || e.access() != nil
	if method == methodGet {
		r.metrics.previewerFetches[c&7][btoi(card)].Inc()
		if r.opts.Uses != nil && e.counter != nil {
			r.opts.Uses.CountPreviewerFetch(e.counter)
		}
	}
	if card {
		return r.cardAnswer(e, method == methodHead)
	}
	location, target, chosen := "", e.Location, choice{}
	if e.is(flagRouted) {
		var ok routed
		var client netip.Addr
		if location, target, _, chosen, client, ok = r.routedClick(e, rt, rawQuery, at, now, true); ok != routedOK {
			return r.unrouted(rt, ok, client)
		}
		a := redirectTo(e, location, target, rawQuery, chosen, now)
		a.client = client
		return a
	}
	return redirectTo(e, location, target, rawQuery, chosen, now)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
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
func (r *Redirector) gone(rt route, e *Link, method, host, path string, now int64) answer {
	switch rt.view {
	case viewPreview:
		return r.previewAnswer(rt, host, path[:len(path)-1], e, method == methodHead, now)
	case viewQR:
		return answer{resp: respGone, cacheControl: ccNoStore}
	}
	if c := e.routing(); c != nil && c.ExpiredURL() != "" {
		// spec.expiredURL, ahead of the namespace's fallback; never
		// cached, since the link may be edited or deleted.
		return answer{resp: resp302, cacheControl: ccNoStore, location: c.ExpiredURL()}
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
