package redirect

import (
	"errors"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/pages"
	"github.com/linkforge/linkforge/internal/shortcode"
)

// A link previewer (a chat app unfurling a pasted link, a crawler, a mail
// prefetcher, a monitor: agent.Agent.Reads) that GETs a link with a card,
// or a link with maxUses, is answered the link's card instead of a
// redirect: 200 and a small HTML page with Open Graph and Twitter Card
// tags, noindex, no script and no destination in it. It spends no use, and
// a client that lies to be a previewer gets the card, not the destination.
// A link without a card of its own shows its namespace's card
// (annotations), else a neutral default. This file decides which card a
// link shows; package pages renders it (pages.Card) once per link version
// (the Link holds it; namespace cards once per namespace version, in a
// pages.CardCache) within the render budget, and it is answered from
// memory after that.

// Card annotations on a Namespace: the card its links with maxUses and
// without spec.card show previewers.
const (
	CardTitleAnnotation       = "linkforge.io/card-title"
	CardDescriptionAnnotation = "linkforge.io/card-description"
	CardImageAnnotation       = "linkforge.io/card-image"
)

// cardHeaders are the card's headers: not indexed, no script, no referrer.
var cardHeaders = previewHeaders

// linkCard is a link's spec.card as the redirector keeps it, and its page
// once rendered (nil until the first previewer asks).
type linkCard struct {
	data pages.Card
	page atomic.Pointer[[]byte]
}

// newLinkCard is the card of spec.card (nil: none). The image is kept as
// its Location (the controller validated and judged it, as spec.url).
func newLinkCard(c *linkv1.LinkCard) *linkCard {
	if c == nil {
		return nil
	}
	d := pages.Card{Title: pages.CardText(c.Title), Description: pages.CardText(c.Description)}
	if c.Image != "" {
		d.Image = Location(string(c.Image))
	}
	if d.Title == "" {
		d.Title = pages.DefaultCard.Title
	}
	return &linkCard{data: d}
}

// namespaceCard is the card a namespace's annotations set, and whether
// they set one; an image that is not an absolute http(s) URL is left out
// (and the card keeps its text).
func namespaceCard(annotations map[string]string) (pages.Card, bool) {
	d := pages.Card{
		Title:       pages.CardText(truncate(annotations[CardTitleAnnotation], linkv1.MaxCardTitle)),
		Description: pages.CardText(truncate(annotations[CardDescriptionAnnotation], linkv1.MaxCardDescription)),
	}
	if img := annotations[CardImageAnnotation]; img != "" && len(img) <= 2048 {
		if _, err := shortcode.Canonicalize(img); err == nil {
			d.Image = Location(img)
		}
	}
	if d == (pages.Card{}) {
		return pages.Card{}, false
	}
	if d.Title == "" {
		d.Title = pages.DefaultCard.Title
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
	if page, ok := r.nsCards.Get(key.ns, key.resourceVersion); ok {
		return page, true
	}
	page, ok := r.renderCard(d)
	if ok {
		r.nsCards.Add(key.ns, key.resourceVersion, page)
	}
	return page, ok
}

// nsCardKey is a rendered namespace card's key in the cache: the
// namespace's version, so an edit of its annotations renders anew.
type nsCardKey struct{ ns, resourceVersion string }

// namespaceCard is the card of namespace ns's limited links without one of
// their own (its annotations', else the default) and its cache key.
func (r *Redirector) namespaceCard(ns string) (*pages.Card, nsCardKey) {
	if obj, ok := r.namespaces.Load(ns); ok {
		n := obj.(*corev1.Namespace)
		if d, set := namespaceCard(n.Annotations); set {
			return &d, nsCardKey{ns: n.Name, resourceVersion: n.ResourceVersion}
		}
	}
	return &pages.DefaultCard, nsCardKey{}
}

// namespaceCardOf is namespaceCard's card alone.
func (r *Redirector) namespaceCardOf(ns string) *pages.Card {
	d, _ := r.namespaceCard(ns)
	return d
}

// renderCard renders d within the render budget.
func (r *Redirector) renderCard(d *pages.Card) ([]byte, bool) {
	page, err := d.Render(r.render)
	var busy pages.BusyError
	switch {
	case errors.As(err, &busy):
		r.metrics.renderRefused[viewCard].Inc()
		return nil, false
	case err != nil: // not for these types
		r.log.Error(err, "rendering a card")
		return nil, false
	}
	return page, true
}
