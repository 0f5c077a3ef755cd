package redirect

import (
	"net/http"

	"github.com/valyala/fasthttp"

	"github.com/linkforge/linkforge/internal/events"
)

// click offers the click event of a request that answer answered
// (docs/events.md): one per GET of a link's redirect path, whatever the
// answer (a redirect, 410, the 503 of a use limit, a fallback), one per
// POST of a password to a gated link's redirect path (the only POST
// answer takes), and one per GET of a path no link holds (an orphan, its
// code the path). Not clicks: HEAD (link unfurlers and monitors, which
// uses do not count either), the QR code and preview views (a look at the
// link, not a visit), "/", 405, and the 503 before the index is synced.
// The record is built on the stack and Offer neither waits nor allocates;
// a full buffer drops the event and counts it.
//
// A gated link's event says so, and whether the request passed the gate
// (answer.gatePassed); nothing of the request's body, where a password
// is, goes into the record.
//
// What answer decided is carried out of it (answer.click, link, target):
// the event names the link version that answered, and the request is
// neither routed nor looked up again.
func (r *Redirector) click(ctx *fasthttp.RequestCtx, method, path string, a *answer) {
	if method != http.MethodGet && method != methodPost || a.click == clickNone {
		return
	}
	var rec events.Record
	rec.Rule, rec.Variant = int16(a.chosen.rule)-1, int16(a.chosen.variant)-1
	rec.Status = uint16(a.resp.status)
	e := a.link
	if e != nil {
		rec.Namespace, rec.Name, rec.UID = e.Namespace, e.Name, e.UID
		rec.LinkPlain = e.is(flagEventPlain)
		rec.SetCodeString(e.Code)
		if e.access() != nil {
			g := events.GateNotPassed
			if a.gatePassed {
				g = events.GatePassed
			}
			rec.SetGate(g)
		}
	} else if len(path) > 1 {
		// An orphan's code is its path, namespace and all: the request's
		// bytes, copied (a Record's strings must outlive the request).
		rec.SetCodeString(path[1:])
	}
	if a.redirect() {
		// The target the link chose, without the query it may forward;
		// else the Location (spec.expiredURL, a fallback), which has none.
		rec.Target = a.target
		if rec.Target == "" {
			rec.Target = a.location
		}
		// The link's Location (the same string: one comparison of
		// pointers) was checked when the link was read.
		rec.TargetPlain = e != nil && e.is(flagPlainLocation) && rec.Target == e.Location
	}
	h := &ctx.Request.Header
	rec.SetReferer(h.Referer())
	rec.SetUserAgent(h.UserAgent())
	if r.countryHeader != "" {
		rec.SetCountry(h.PeekCanonical(sbytes(r.countryHeader)))
	}
	rec.Client = r.client(ctx, a) // the one client address (clientAddress)
	r.opts.ClickEvents.Offer(&rec)
}
