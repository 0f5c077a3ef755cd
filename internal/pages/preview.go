package pages

import (
	"bytes"
	"html/template"
)

// The preview page (GET /<namespace>/<code>+) names where a link goes and
// what it does, instead of redirecting: bit.ly's "+" preview. It has no
// script, and asks search engines not to index it. It names the link by
// its path only, no host, so it carries no host a request named. The
// redirector decides what it says (Preview) and answers it with
// PageHeaders; it is rendered within the budget.

// ContentTypeHTML is the content type of the preview and card pages.
const ContentTypeHTML = "text/html; charset=utf-8"

// headerCSP names the Content-Security-Policy header of every page.
const headerCSP = "Content-Security-Policy"

// Header is a response header.
type Header struct{ Name, Value string }

// NoSniff forbids sniffing a content type other than the one answered.
var NoSniff = Header{"X-Content-Type-Options", "nosniff"}

// PageHeaders are the headers of the preview and card pages: not indexed,
// no script, no referrer, no sniffing.
var PageHeaders = []Header{
	{"X-Robots-Tag", "noindex, nofollow"},
	{headerCSP, "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"},
	{"Referrer-Policy", "no-referrer"},
	NoSniff,
}

// previewPage is the page. html/template escapes what it inserts for its
// context (the link's URL in an attribute and in text).
var previewPage = template.Must(template.New("preview").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="robots" content="noindex, nofollow">
<meta name="referrer" content="no-referrer">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>Short link {{if .URL}}{{.URL}}{{else}}{{.Path}}{{end}}</title>
<style>body{font-family:system-ui,sans-serif;max-width:42rem;margin:3rem auto;padding:0 1rem;line-height:1.5}a,code{overflow-wrap:anywhere}</style>
</head>
<body>
<h1>Short link {{if .URL}}{{.URL}}{{else}}{{.Path}}{{end}}</h1>
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

// Preview is what a preview page says of a link.
type Preview struct {
	// Path is the link's path, without its "+" (no host).
	Path string
	// URL is the link's short URL on a host the operator vouches for (its
	// public base URL, or the domain its namespace claims): the page names
	// it instead of Path. Empty: Path alone.
	URL string
	// Destination is where the link goes, or went (empty: not shown).
	Destination string
	// Redirects says it goes there still.
	Redirects bool
	// State and Detail are the link's state in a word and in a sentence.
	State  string
	Detail string
	// Routing is the link's rules, split, expired URL and path forwarding
	// in words (rules.Describe): text, escaped as such.
	Routing []string
	// Card is the card previewers get (nil: they are redirected).
	Card *Card
}

// Render renders the page within b: a BusyError when b refuses it.
func (p *Preview) Render(b *Budget) ([]byte, error) {
	return b.render(func() ([]byte, error) {
		var buf bytes.Buffer
		if err := previewPage.Execute(&buf, p); err != nil {
			return nil, err
		}
		return buf.Bytes(), nil
	})
}
