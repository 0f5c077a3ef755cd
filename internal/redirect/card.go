package redirect

import (
	"bytes"
	"html/template"
	"strings"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/shortcode"
)

// A link previewer (a chat app unfurling a pasted link, a crawler, a mail
// prefetcher, a monitor: agent.Agent.Reads) that GETs a link with a card,
// or a link with maxUses, is answered the link's card instead of a
// redirect: 200 and a small HTML page with Open Graph and Twitter Card
// tags, noindex, no script and no destination in it. It spends no use, and
// a client that lies to be a previewer gets the card, not the destination.
// A link without a card of its own shows its namespace's card
// (annotations), else a neutral default. A card is rendered once per link
// version (the Link holds it; namespace cards once per namespace version)
// within the render budget, and answered from memory after that.

// Card annotations on a Namespace: the card its links with maxUses and
// without spec.card show previewers.
const (
	CardTitleAnnotation       = "linkforge.io/card-title"
	CardDescriptionAnnotation = "linkforge.io/card-description"
	CardImageAnnotation       = "linkforge.io/card-image"
)

// defaultCard is the card of a limited link whose namespace sets none:
// it says nothing of where the link leads.
var defaultCard = cardData{Title: "Shared link", Description: "Open the link to see where it leads."}

// cardHeaders are the card's headers: not indexed, no script, no referrer.
var cardHeaders = previewHeaders

// cardPage is the page. html/template escapes what it inserts for its
// context.
var cardPage = template.Must(template.New("card").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="robots" content="noindex, nofollow">
<meta name="referrer" content="no-referrer">
<title>{{.Title}}</title>
<meta property="og:type" content="website">
<meta property="og:title" content="{{.Title}}">
<meta name="twitter:card" content="{{if .Image}}summary_large_image{{else}}summary{{end}}">
<meta name="twitter:title" content="{{.Title}}">
{{if .Description}}<meta name="description" content="{{.Description}}">
<meta property="og:description" content="{{.Description}}">
<meta name="twitter:description" content="{{.Description}}">
{{end}}{{if .Image}}<meta property="og:image" content="{{.Image}}">
<meta name="twitter:image" content="{{.Image}}">
{{end}}<style>body{font-family:system-ui,sans-serif;max-width:42rem;margin:3rem auto;padding:0 1rem;line-height:1.5}</style>
</head>
<body>
<h1>{{.Title}}</h1>
{{if .Description}}<p>{{.Description}}</p>
{{end}}</body>
</html>
`))

// cardData is what a card shows. Title is never empty (a card without
// one is titled by the default's).
type cardData struct {
	Title, Description, Image string
}

// linkCard is a link's spec.card as the redirector keeps it, and its page
// once rendered (nil until the first previewer asks).
type linkCard struct {
	data cardData
	page atomic.Pointer[[]byte]
}

// newLinkCard is the card of spec.card (nil: none). The image is kept as
// its Location (the controller validated and judged it, as spec.url).
func newLinkCard(c *linkv1.LinkCard) *linkCard {
	if c == nil {
		return nil
	}
	d := cardData{Title: cardText(c.Title), Description: cardText(c.Description)}
	if c.Image != "" {
		d.Image = Location(string(c.Image))
	}
	if d.Title == "" {
		d.Title = defaultCard.Title
	}
	return &linkCard{data: d}
}

// cardText is a card's text on one line: previewers show one paragraph.
func cardText(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// namespaceCard is the card a namespace's annotations set, and whether
// they set one; an image that is not an absolute http(s) URL is left out
// (and the card keeps its text).
func namespaceCard(annotations map[string]string) (cardData, bool) {
	d := cardData{
		Title:       cardText(truncate(annotations[CardTitleAnnotation], linkv1.MaxCardTitle)),
		Description: cardText(truncate(annotations[CardDescriptionAnnotation], linkv1.MaxCardDescription)),
	}
	if img := annotations[CardImageAnnotation]; img != "" && len(img) <= 2048 {
		if _, err := shortcode.Canonicalize(img); err == nil {
			d.Image = Location(img)
		}
	}
	if d == (cardData{}) {
		return cardData{}, false
	}
	if d.Title == "" {
		d.Title = defaultCard.Title
	}
	return d, true
}

// truncate cuts s to at most n bytes, at a rune boundary.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && n < len(s) && s[n]&0xc0 == 0x80 {
		n--
	}
	return s[:n]
}

// nsCardKey is a rendered namespace card's cache key: the namespace's
// version, so an edit of its annotations renders anew.
type nsCardKey struct{ ns, resourceVersion string }

// cardAnswer answers a previewer's request for link e with its card (for
// HEAD, the headers alone): 200, no store, within the render budget for a
// card not rendered yet.
func (r *Redirector) cardAnswer(e *Link, head bool) answer {
	a := answer{resp: respOK, contentType: contentTypeHTML, cacheControl: ccNoStore, extra: cardHeaders, click: clickLink, link: e}
	if head {
		return a
	}
	page, ok := r.cardPageOf(e)
	if !ok {
		return answer{resp: respRenderBusy, cacheControl: ccNoStore, retryAfter: hdrRetry, click: clickLink, link: e}
	}
	a.body = page
	return a
}

// cardPageOf is the page of e's card (its own, else its namespace's, else
// the default), rendered now if it was not yet; ok is false when the
// render budget refused it.
func (r *Redirector) cardPageOf(e *Link) ([]byte, bool) {
	if c := e.card(); c != nil {
		if p := c.page.Load(); p != nil {
			return *p, true
		}
		page, ok := r.renderCard(&c.data)
		if ok {
			c.page.Store(&page)
		}
		return page, ok
	}
	d, key := r.namespaceCard(e.Namespace)
	if page, ok := r.nsCards.get(key); ok {
		return page, true
	}
	page, ok := r.renderCard(d)
	if ok {
		r.nsCards.add(key, page)
	}
	return page, ok
}

// namespaceCard is the card of namespace ns's limited links without one of
// their own (its annotations', else the default) and its cache key.
func (r *Redirector) namespaceCard(ns string) (*cardData, nsCardKey) {
	if obj, ok := r.namespaces.Load(ns); ok {
		n := obj.(*corev1.Namespace)
		if d, set := namespaceCard(n.Annotations); set {
			return &d, nsCardKey{ns: n.Name, resourceVersion: n.ResourceVersion}
		}
	}
	return &defaultCard, nsCardKey{}
}

// namespaceCardOf is namespaceCard's card alone.
func (r *Redirector) namespaceCardOf(ns string) *cardData {
	d, _ := r.namespaceCard(ns)
	return d
}

// renderCard renders d within the render budget.
func (r *Redirector) renderCard(d *cardData) ([]byte, bool) {
	release, _, ok := r.render.acquire()
	if !ok {
		r.metrics.renderRefused[viewCard].Inc()
		return nil, false
	}
	defer release()
	var buf bytes.Buffer
	if err := cardPage.Execute(&buf, d); err != nil { // not for these types
		r.log.Error(err, "rendering a card")
		return nil, false
	}
	return buf.Bytes(), true
}

// nsCardCacheBytes bounds the namespace cards kept rendered.
const nsCardCacheBytes = 1 << 20

func newNSCardCache() *lru[nsCardKey, []byte] {
	return newLRU(nsCardCacheBytes, func(k nsCardKey, v []byte) int { return len(k.ns) + len(k.resourceVersion) + len(v) + 64 })
}
