package redirect

import (
	"bytes"
	"html/template"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// GET /<namespace>/<code>+ (and /<code>+ on a vanity host) answers a small
// HTML page that names where the link goes and what it does, instead of
// redirecting: bit.ly's "+" preview. It is not a use, has no script, and
// asks search engines not to index it. A link that is not active yet
// answers as an unknown code (404), as its redirect does. A finished link
// whose namespace (or the redirector) sends finished codes to a gone
// fallback does not show its old destination: its redirect hides it too.
// The page names the link by its path only, no host, so it carries no
// host a request named. It is rendered within the render budget
// (render.go; else 503 with Retry-After), and not at all for HEAD.

var (
	previewHeaders = []header{
		{key: []byte("X-Robots-Tag"), value: "noindex, nofollow"},
		{key: []byte("Content-Security-Policy"), value: "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"},
		{key: []byte("Referrer-Policy"), value: "no-referrer"},
		hdrNoSniff,
	}
	respPreviewGone = newCanned(http.StatusGone, "")
	respInternal    = newCanned(http.StatusInternalServerError, "500 Internal Server Error\n")
)

const contentTypeHTML = "text/html; charset=utf-8"

// previewPage is the page. html/template escapes what it inserts for its
// context (the link's URL in an attribute and in text).
var previewPage = template.Must(template.New("preview").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="robots" content="noindex, nofollow">
<meta name="referrer" content="no-referrer">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Short link {{.Path}}</title>
<style>body{font-family:system-ui,sans-serif;max-width:42rem;margin:3rem auto;padding:0 1rem;line-height:1.5}a,code{overflow-wrap:anywhere}</style>
</head>
<body>
<h1>Short link {{.Path}}</h1>
{{if .Destination}}<p>{{if .Redirects}}It redirects to{{else}}It redirected to{{end}}:</p>
<p><a href="{{.Destination}}" rel="nofollow noopener noreferrer">{{.Destination}}</a></p>
{{end}}<p>State: <strong>{{.State}}</strong>. {{.Detail}}</p>
{{if .Routing}}<p>Where its clicks go:</p>
<ul>{{range .Routing}}<li>{{.}}</li>{{end}}</ul>
{{end}}{{with .Card}}<p>What link previewers (chat apps, crawlers) are shown instead of a redirect:</p>
<blockquote><strong>{{.Title}}</strong>{{if .Description}}<br>{{.Description}}{{end}}{{if .Image}}<br>Image: <code>{{.Image}}</code>{{end}}</blockquote>
{{end}}</body>
</html>
`))

type previewData struct {
	Path        string
	Destination string
	Redirects   bool
	State       string
	Detail      string
	// Routing is the link's rules, split, expired URL and path forwarding
	// in words (rules.Describe): text, escaped as such.
	Routing []string
	// Card is the card previewers get (nil: they are redirected).
	Card *cardData
}

// previewAnswer answers the preview of e, named by rt and path (without
// its "+"); for HEAD without rendering it.
func (r *Redirector) previewAnswer(rt route, path string, e *Link, head bool, now int64) answer {
	d := previewData{Path: path, Destination: e.Location, State: "Active", Redirects: true}
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
	release, retryAfter, ok := r.render.acquire()
	if !ok {
		r.metrics.renderRefused[viewPreview].Inc()
		return answer{resp: respRenderBusy, cacheControl: ccNoStore, retryAfter: retryAfterSeconds(int64((retryAfter + time.Second - 1) / time.Second))}
	}
	defer release()
	var buf bytes.Buffer
	if err := previewPage.Execute(&buf, d); err != nil {
		r.log.Error(err, "rendering a preview page")
		return answer{resp: respInternal, cacheControl: ccNoStore}
	}
	a.body = buf.Bytes()
	return a
}
