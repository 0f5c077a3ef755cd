package redirect

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/linkforge/linkforge/internal/pages"
)

// GET /<namespace>/<code>+ (and /<code>+ on a vanity host) answers a small
// HTML page that names where the link goes and what it does, instead of
// redirecting: bit.ly's "+" preview. It is not a use, has no script, and
// asks search engines not to index it. A link that is not active yet
// answers as an unknown code (404), as its redirect does. A finished link
// whose namespace (or the redirector) sends finished codes to a gone
// fallback does not show its old destination: its redirect hides it too.
// The page names the link by its path only, no host, so it carries no
// host a request named. This file decides what the page says; package
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

// previewAnswer answers the preview of e, named by rt and path (without
// its "+"); for HEAD without rendering it.
func (r *Redirector) previewAnswer(rt route, path string, e *Link, head bool, now int64) answer {
	d := pages.Preview{Path: path, Destination: e.Location, State: "Active", Redirects: true}
	status := respOK
	switch {
	case e.is(flagTombstone):
		d.State, d.Detail, d.Redirects = "Removed", "It expired or served all of its uses and was deleted; it answers 410 Gone.", false
		status = respPreviewGone
	case e.gone(now) && e.is(flagExpires) && now >= e.until:
		d.State, d.Redirects = "Expired", false
		d.Detail = "It expired at " + time.Unix(0, e.until).UTC().Format(time.RFC3339) + " and answers 410 Gone."
		status = respPreviewGone
	case e.gone(now) && e.is(flagMaxUses):
		d.State, d.Detail, d.Redirects = "Exhausted", "It served all of its uses, or was not used for its idle timeout, and answers 410 Gone.", false
		status = respPreviewGone
	case e.gone(now):
		// Finished without a limit or a passed expiry: the controller
		// finished it for want of use (spec.idleTimeout).
		d.State, d.Detail, d.Redirects = "Expired", "It was not used for its idle timeout and answers 410 Gone.", false
		status = respPreviewGone
	default:
		d.Detail = "It answers " + strconv.Itoa(e.Status()) + " " + http.StatusText(e.Status())
		if e.is(flagExpires) {
			d.Detail += " until " + time.Unix(0, e.until).UTC().Format(time.RFC3339)
		}
		if e.is(flagMaxUses) {
			d.Detail += "; its number of uses is limited"
		}
		if e.is(flagForwardQuery) {
			d.Detail += "; it adds the query string of the short link to this URL"
		}
		d.Detail += "."
	}
	expiredURL := ""
	if c := e.routing(); c != nil {
		expiredURL = c.ExpiredURL()
		if !e.is(flagTombstone) {
			d.Routing = e.more.describe
		}
	}
	switch {
	case !d.Redirects && expiredURL != "":
		// spec.expiredURL takes the finished link's clicks, ahead of any
		// fallback: the page names it.
		d.Destination, d.Redirects = expiredURL, true
		d.Detail = strings.Replace(d.Detail, "answers 410 Gone", "redirects to the page it names for when it has finished", 1)
		d.Routing = nil
	case !d.Redirects && r.fallbackLocation(fallbackGone, rt.ns) != "":
		// The link redirects to the gone fallback, which hides where it went.
		d.Destination = ""
		d.Detail = strings.Replace(d.Detail, "answers 410 Gone", "redirects to the page its namespace shows for finished links", 1)
	}
	if c := e.card(); c != nil {
		d.Card = &c.data
	} else if e.is(flagMaxUses) {
		d.Card = r.namespaceCardOf(e.Namespace)
	}
	a := answer{resp: status, contentType: contentTypeHTML, cacheControl: ccNoStore, extra: previewHeaders}
	if head {
		return a // the headers of the page, without rendering it (nor a length)
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
