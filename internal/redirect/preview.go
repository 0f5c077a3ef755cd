package redirect

import (
	"errors"
	"net/http"
	"time"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/explain"
	"github.com/linkforge/linkforge/internal/pages"
)

// GET /<namespace>/<code>+ (and /<code>+ on a vanity host) answers a small
// HTML page that names where the link goes and what it does, instead of
// redirecting: bit.ly's "+" preview. It is not a use, has no script, and
// asks search engines not to index it. A link that is not active yet
// answers as an unknown code (404), as its redirect does. A finished link
// whose namespace (or the redirector) sends finished codes to a gone
// fallback does not show its old destination: its redirect hides it too.
// The page names the link by its short URL where the operator vouches for
// the host (PublicBaseURL, or the domain the link's namespace claims, as
// a QR code does: shortURL), else by its path only: it carries no host a
// request named. This file decides what the page says; package
// pages renders it (pages.Preview) within the render budget (else 503
// with Retry-After), and not at all for HEAD.

var (
	// previewHeaders are the page's headers (pages.PageHeaders).
	previewHeaders  = headersOf(pages.PageHeaders...)
	respPreviewGone = newCanned(http.StatusGone, "")
	respInternal    = newCanned(http.StatusInternalServerError, "500 Internal Server Error\n")
)

const contentTypeHTML = pages.ContentTypeHTML

// headersOf is hs as answers carry them.
func headersOf(hs ...pages.Header) []header {
	h := make([]header, len(hs))
	for i, x := range hs {
		h[i] = header{key: []byte(x.Name), value: x.Value}
	}
	return h
}

// previewAnswer answers the preview of e, named by rt on host and path
// (without its "+"); for HEAD without rendering it. What it says of the link is
// internal/explain's description, as the manager's status and the CLI say it.
func (r *Redirector) previewAnswer(rt route, host, path string, e *Link, head bool, now int64) answer {
	status := respOK
	if e.is(flagTombstone) || e.gone(now) {
		status = respPreviewGone
	}
	if e.access() != nil {
		// A gated link's destination is for whoever passes its gate, and a
		// finished one has no gate left to pass: its card, for anyone (410
		// once it is finished).
		a := r.cardAnswer(e, head)
		if a.resp == respOK {
			a.resp = status
		}
		a.click, a.link = clickNone, nil
		return a
	}
	a := answer{resp: status, contentType: contentTypeHTML, cacheControl: ccNoStore, extra: previewHeaders}
	if head {
		return a // the headers of the page, without describing or rendering it (nor a length)
	}
	ans := explain.Describe(e.explained(), time.Unix(0, now), r.explainFallbacks(rt.ns))
	d := pages.Preview{Path: path, State: ans.State, Detail: "It " + ans.Words + "."}
	if u, byProto, ok := r.shortURL(rt, host, ""); ok && !byProto {
		// A scheme only the proxy's header tells would make the page vary
		// by it: the path alone then.
		d.URL = u
	}
	switch ans.State {
	case string(linkv1.StateActive):
		d.Destination, d.Redirects = ans.Destination, true
		if e.routing() != nil && e.more.describe != nil {
			d.Routing = *e.more.describe
		}
	default: // finished (a link not active yet answers 404 before this)
		switch {
		case ans.Destination != "":
			// spec.expiredURL takes the finished link's clicks, ahead of
			// any fallback: the page names it.
			d.Destination, d.Redirects = ans.Destination, true
		case ans.Location == "":
			// 410: the page names where it went.
			d.Destination = e.Location
		}
		// A gone fallback hides where it went, as its redirect does.
	}
	if c := e.card(); c != nil {
		d.Card = &c.data
	} else if e.is(flagMaxUses) {
		d.Card = r.namespaceCardOf(e.Namespace)
	}
	page, err := d.Render(r.render)
	var busy pages.BusyError
	switch {
	case errors.As(err, &busy):
		r.metrics.renderRefused[viewPreview].Inc()
		return answer{resp: respRenderBusy, cacheControl: ccNoStore, retryAfter: busyRetryAfter(busy)}
	case err != nil:
		r.log.Error(err, "rendering a preview page")
		return answer{resp: respInternal, cacheControl: ccNoStore}
	}
	a.body = page
	return a
}

// busyRetryAfter is the Retry-After of a render refused for want of
// budget, in whole seconds rounded up.
func busyRetryAfter(busy pages.BusyError) string {
	return retryAfterSeconds(int64((busy.RetryAfter + time.Second - 1) / time.Second))
}

// explained is e as internal/explain reads it: what the index holds of the
// link, so that the preview describes what this redirector answers.
func (e *Link) explained() explain.Link {
	x := explain.Link{Code: e.Code, Serves: true, Status: e.Status(), Location: e.Location, ForwardQuery: e.is(flagForwardQuery)}
	if acc := e.access(); acc != nil {
		x.Password, x.SignIn = acc.hash != "", acc.allowed.Any()
	}
	if c := e.routing(); c != nil {
		x.ExpiredURL, x.ForwardPath, x.Rules, x.Variants = c.ExpiredURL(), c.ForwardPath(), c.Rules(), c.Variants()
		if at, url, ok := c.VariantsEnd(); ok {
			x.VariantsEndAt, x.VariantsEndURL = at, url
		}
	}
	if e.is(flagTombstone) {
		x.Finish = explain.Removed // until is the tombstone's end, not an expiry
		return x
	}
	if e.is(flagExpires) {
		x.ExpiresAt = time.Unix(0, e.until)
	}
	if e.is(flagActivates) {
		x.ActivatesAt = time.Unix(0, e.more.activates)
	}
	x.MaxUses, x.Card = e.maxUsesLimit(), e.is(flagCard)
	if e.is(flagFinished) {
		switch {
		case x.MaxUses > 0 && e.statusUses >= x.MaxUses:
			x.Finish = explain.Exhausted
		case e.is(flagIdleTimeout):
			x.Finish = explain.Idle
		default:
			x.Finish = explain.Exhausted
		}
	}
	return x
}

// explainFallbacks are the fallbacks that apply to namespace ns: its
// annotations', else the redirector's own.
func (r *Redirector) explainFallbacks(ns string) explain.Fallbacks {
	return explain.Fallbacks{NotFound: r.fallbackLocation(fallbackNotFound, ns), Gone: r.fallbackLocation(fallbackGone, ns)}
}
