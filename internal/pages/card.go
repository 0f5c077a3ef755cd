package pages

import (
	"bytes"
	"html/template"
	"strings"
)

// A card is what a link previewer (a chat app unfurling a pasted link, a
// crawler) is answered instead of a redirect: a small HTML page with Open
// Graph and Twitter Card tags, noindex, no script and no destination in
// it, answered with PageHeaders. The redirector decides which card a link
// shows and keeps it rendered (a link's on the link, namespaces' in a
// CardCache), so a card is rendered once per version, within the budget.

// DefaultCard is the card of a limited link whose namespace sets none: it
// says nothing of where the link leads.
var DefaultCard = Card{Title: "Shared link", Description: "Open the link to see where it leads."}

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

// Card is what a card shows. Title is never empty (a card without one is
// titled by DefaultCard's). Image is a URL the caller judged fit to show.
type Card struct {
	Title, Description, Image string
}

// CardText is a card's text on one line: previewers show one paragraph.
func CardText(s string) string {
	return strings.Join(strings.Fields(s), " ")
}

// Render renders the card within b: a BusyError when b refuses it.
func (c *Card) Render(b *Budget) ([]byte, error) {
	return b.render(func() ([]byte, error) {
		var buf bytes.Buffer
		if err := cardPage.Execute(&buf, c); err != nil { // not for these types
			return nil, err
		}
		return buf.Bytes(), nil
	})
}

// cardCacheBytes bounds the namespace cards a CardCache keeps rendered.
const cardCacheBytes = 1 << 20

// cardKey is a rendered namespace card's cache key: the namespace's
// version, so an edit of its annotations renders anew.
type cardKey struct{ ns, resourceVersion string }

// CardCache keeps namespaces' cards rendered, by namespace and version,
// within a megabyte, least recently used first out.
type CardCache struct{ c *lru[cardKey, []byte] }

// NewCardCache is an empty cache.
func NewCardCache() *CardCache {
	return &CardCache{c: newLRU(cardCacheBytes, func(k cardKey, v []byte) int { return len(k.ns) + len(k.resourceVersion) + len(v) + 64 })}
}

// Get is the page of namespace ns's card at resourceVersion, if kept.
func (c *CardCache) Get(ns, resourceVersion string) ([]byte, bool) {
	return c.c.get(cardKey{ns, resourceVersion})
}

// Add keeps page as namespace ns's card at resourceVersion.
func (c *CardCache) Add(ns, resourceVersion string, page []byte) {
	c.c.add(cardKey{ns, resourceVersion}, page)
}
