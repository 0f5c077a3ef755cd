package redirect

import (
	"net/http"
	"net/netip"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/clientaddr"
	"github.com/linkforge/linkforge/internal/gate"
	"github.com/linkforge/linkforge/internal/pages"
)

// A gated link (spec.access) redirects only whoever passes its gate:
//
//   - a request from a trusted auth proxy (Options.AuthProxies, the
//     socket's peer) naming an allowed user, or a member of an allowed
//     group, in Options.AuthUserHeader and AuthGroupsHeader, is redirected
//     as any click is (a use of maxUses);
//   - else, with a password: a GET is answered the form (200), and a POST
//     of the right password is redirected with 303 See Other (never 307 or
//     308, which would post the password on to the destination), a use
//     spent then; a wrong password, or any while the client or the link
//     may not guess (gate.Limiter), is answered the form again with one
//     message, after as long as a verification takes, so neither the
//     words, the size nor the time tell the two apart. A verification runs
//     within the render budget (pages.Budget: a share of the CPUs, a few at
//     once), and beyond it is answered 503 with Retry-After;
//   - else (a sign-in gate only): whoever is not signed in is sent to
//     Options.SignInURL (302), or answered 403 without one; a person
//     signed in whom the link does not allow gets 403 (sent to sign in,
//     they would come back signed in as the same person, and be sent
//     again, for ever: a browser's "too many redirects").
//
// Previewers get the link's card (or its namespace's, or the neutral one),
// the preview page shows the card, HEAD the headers of the form: nothing
// of a gated link tells its destination to whoever has not passed.

// linkAccess is spec.access as a Link keeps it.
type linkAccess struct {
	hash string // spec.access.passwordHash ("": no password)
	// costShift is the hash's cost past gate.MinCost: a check takes
	// 1<<costShift times one at the lowest cost.
	costShift uint8
	allowed   gate.Allowed
	// form is the password form of the link, fresh (0) and refused (1),
	// once rendered.
	form [2]atomic.Pointer[[]byte]
}

// newLinkAccess is the access of spec.access (nil: none).
func newLinkAccess(a *linkv1.LinkAccess) *linkAccess {
	if a == nil {
		return nil
	}
	return &linkAccess{hash: a.PasswordHash, costShift: uint8(gate.Cost(a.PasswordHash) - gate.MinCost),
		allowed: gate.Allowed{Users: a.Users, Groups: a.Groups}}
}

// access is the link's gate, or nil.
func (l *Link) access() *linkAccess {
	if l == nil || l.more == nil {
		return nil
	}
	return l.more.access
}

// methodPost is the method of a password posted to a gated link.
const methodPost = "POST"

// The answers of the gate.
var (
	resp303       = newCanned(http.StatusSeeOther, "303 See Other\n")
	respForbidden = newCanned(http.StatusForbidden, "403 Forbidden: this link opens only for the people it names; sign in through your organisation's sign-in\n")
	respGateBusy  = newCanned(http.StatusServiceUnavailable, "503 Service Unavailable: too many passwords are being checked; retry shortly (redirects are not affected)\n")
	gateHeaders   = headersOf(pages.GatePageHeaders...)
)

// The results of a gate, for linkforge_redirector_gate_total.
const (
	gatePassed    = iota // the right password
	gateRefused          // a wrong password
	gateLimited          // a password not checked: the client or the link may not guess now
	gateBusy             // a password not checked: the render budget is spent (503)
	gateAdmitted         // an allowed user or group, from a trusted proxy
	gateSignIn           // sent to sign in
	gateForbidden        // 403: not signed in as anyone allowed, and no password (nor, for whoever is not signed in, a sign-in URL)
	numGateResults
)

var gateResultNames = [numGateResults]string{"passed", "refused", "limited", "busy", "admitted", "sign-in", "forbidden"}

// newGateMetrics is linkforge_redirector_gate_total, by result.
func newGateMetrics(reg prometheus.Registerer) [numGateResults]prometheus.Counter {
	vec := prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: metricsNamespace, Subsystem: metricsSubsystem,
		Name: "gate_total",
		Help: "Requests to gated links (spec.access) by what the gate made of them: passed (the right password: redirected), refused (a wrong one), limited (not checked: the client or the link may not guess now, see docs/security.md), busy (not checked: too many passwords being checked, 503), admitted (an allowed user or group from a trusted auth proxy), sign-in (sent to --auth-sign-in-url), forbidden (403)."},
		[]string{"result"})
	var out [numGateResults]prometheus.Counter
	for i, name := range gateResultNames {
		out[i] = vec.WithLabelValues(name)
	}
	if reg != nil {
		reg.MustRegister(vec)
	}
	return out
}

// verifyEstimate is how long a verification took, on average: what a
// refusal without one waits (initially a bcrypt check at DefaultCost on a
// quiet core).
const verifyEstimate = 80 * time.Millisecond

// gate decides a person's request (GET, HEAD or POST on the redirect path)
// for gated link e: stop says the answer is a's; otherwise the request
// passed, and goes on to the redirect (posted: with 303). a.gatePassed
// says which, for the click event (a gated link's says gatePassed): true
// for the outcomes that pass (passed, admitted), false for every other
// (the form, refused, limited, busy, sign-in, forbidden), whose answers
// stop here.
func (r *Redirector) gate(e *Link, acc *linkAccess, method string, rt route, host, rawQuery string, at requestClock) (a answer, stop bool) {
	ctx := ctxOf(at)
	id := r.identity(ctx)
	if acc.allowed.Any() && acc.allowed.Admits(id) {
		r.gateMetrics[gateAdmitted].Inc()
		return answer{gatePassed: true}, false
	}
	if acc.hash == "" {
		if r.opts.SignInURL != "" && method != methodPost && !id.SignedIn() {
			r.gateMetrics[gateSignIn].Inc()
			return answer{resp: resp302, cacheControl: ccNoStore, location: r.signInURL(rt, host, rawQuery, ctx), click: clickLink, link: e}, true
		}
		r.gateMetrics[gateForbidden].Inc()
		return answer{resp: respForbidden, cacheControl: ccNoStore, click: clickLink, link: e}, true
	}
	switch method {
	case methodHead:
		return r.formAnswer(e, acc, true, false), true
	case methodGet:
		return r.formAnswer(e, acc, false, false), true
	}
	// A posted password.
	var client netip.Addr
	var password []byte
	if ctx != nil {
		client = r.clientAddress(ctx)
		if strings.HasPrefix(string(ctx.Request.Header.ContentType()), "application/x-www-form-urlencoded") {
			password = ctx.PostArgs().Peek("password")
		}
	}
	key := e.Namespace + "/" + e.Code
	if ok, _, _ := r.gateLimiter.Attempt(key, client); !ok {
		r.gateMetrics[gateLimited].Inc()
		// As long as a check of this hash takes: a lock is not told from
		// a wrong password.
		time.Sleep(time.Duration(r.verifyTime.Load()) << acc.costShift)
		a := r.formAnswer(e, acc, false, true)
		a.client = client
		return a, true
	}
	release, retryAfter, ok := r.render.Acquire()
	if !ok {
		r.gateLimiter.Refund(key, client) // not checked: no guess spent
		r.gateMetrics[gateBusy].Inc()
		r.metrics.renderRefused[viewGate].Inc()
		return answer{resp: respGateBusy, cacheControl: ccNoStore, retryAfter: retryAfterSeconds(int64((retryAfter + time.Second - 1) / time.Second)),
			click: clickLink, link: e, client: client}, true
	}
	began := time.Now()
	matched := gate.Verify(acc.hash, password)
	release()
	r.noteVerifyTime(time.Since(began) >> acc.costShift)
	if !matched {
		r.gateMetrics[gateRefused].Inc()
		a := r.formAnswer(e, acc, false, true)
		a.client = client
		return a, true
	}
	r.gateMetrics[gatePassed].Inc()
	return answer{client: client, gatePassed: true}, false
}

// noteVerifyTime folds d into the running average of verifications.
func (r *Redirector) noteVerifyTime(d time.Duration) {
	old := r.verifyTime.Load()
	r.verifyTime.Store(old + (int64(d)-old)/8)
}

// formAnswer is the password form of e (refused: with the one message of
// a password that did not open it), or its headers for HEAD. It is
// rendered once per link version within the render budget; a render the
// budget refuses is a 503.
func (r *Redirector) formAnswer(e *Link, acc *linkAccess, head, refused bool) answer {
	a := answer{resp: respOK, contentType: contentTypeHTML, cacheControl: ccNoStore, extra: gateHeaders, click: clickLink, link: e}
	if head {
		return a
	}
	i := btoi(refused)
	if p := acc.form[i].Load(); p != nil {
		a.body = *p
		return a
	}
	g := pages.Gate{Card: *r.cardOf(e)}
	if refused {
		g.Refused = pages.GateRefused
	}
	page, err := g.Render(r.render)
	if err != nil {
		r.metrics.renderRefused[viewGate].Inc()
		return answer{resp: respRenderBusy, cacheControl: ccNoStore, retryAfter: hdrRetry, click: clickLink, link: e}
	}
	acc.form[i].Store(&page)
	a.body = page
	return a
}

// cardOf is the card e shows: its own, else its namespace's, else the
// neutral one.
func (r *Redirector) cardOf(e *Link) *pages.Card {
	if c := e.card(); c != nil {
		return &c.data
	}
	return r.namespaceCardOf(e.Namespace)
}

// identity is who the request's trusted auth proxy says sent it: nobody
// unless the socket's peer is one of Options.AuthProxies and it names one
// user (a header sent twice names nobody: a client's own beside the
// proxy's).
func (r *Redirector) identity(ctx *fasthttp.RequestCtx) gate.Identity {
	if ctx == nil || r.opts.AuthUserHeader == "" || !r.opts.AuthProxies.Trusts(clientaddr.FromSlice(ctx.RemoteIP())) {
		return gate.Identity{}
	}
	h := &ctx.Request.Header
	users := h.PeekAll(r.opts.AuthUserHeader)
	if len(users) != 1 {
		return gate.Identity{}
	}
	id := gate.Identity{User: strings.TrimSpace(string(users[0]))}
	if len(id.User) > gate.MaxNameBytes {
		return gate.Identity{}
	}
	if r.opts.AuthGroupsHeader != "" {
		for _, v := range h.PeekAll(r.opts.AuthGroupsHeader) {
			id.Groups = append(id.Groups, gate.ParseGroups(string(v))...)
		}
	}
	return id
}

// signInURL is Options.SignInURL with {url} replaced by the link's short
// URL (query-escaped, with the request's query), where the sign-in sends
// the person back: the URL a QR code of the request would show
// (shortURL: the public base, or the vanity host the namespace claims),
// never one the request's Host alone names; without one, the request's
// path, which an auth proxy in front of the redirector resolves on its
// own host.
func (r *Redirector) signInURL(rt route, host, rawQuery string, ctx *fasthttp.RequestCtx) string {
	u := r.opts.SignInURL
	if !strings.Contains(u, "{url}") {
		return u
	}
	var proto string
	if ctx != nil {
		proto = string(ctx.Request.Header.Peek("X-Forwarded-Proto"))
	}
	back, _, ok := r.shortURL(rt, host, proto)
	if !ok {
		back = "/" + rt.code
		if !rt.vanity {
			back = "/" + rt.ns + back
		}
	}
	if rawQuery != "" {
		back += "?" + rawQuery
	}
	return strings.ReplaceAll(u, "{url}", url.QueryEscape(back))
}
