package redirect

import (
	"container/list"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/linkforge/linkforge/internal/qr"
)

// GET /<namespace>/<code>/qr (and /<code>/qr on a vanity host) answers a QR
// code of the link's short URL: the URL of the request without its /qr, on
// Options.PublicBaseURL for the long form when it is set. It answers only
// while the link redirects (otherwise as the link itself: 404 or 410,
// without fallbacks) and is not a use.

// Query parameters of the QR route.
const (
	qrParamFormat = "format" // png or svg; default: the Accept header's choice, else png
	qrParamSize   = "size"   // width in pixels, qr.MinSize to qr.MaxSize
	qrParamMargin = "margin" // quiet zone in modules, qr.MinMargin to qr.MaxMargin
)

const (
	contentTypePNG = "image/png"
	contentTypeSVG = "image/svg+xml"
)

// qrCacheBytes bounds the memory of drawn QR codes one redirector keeps:
// about 2,000 PNGs of the default size, or 400 of the largest SVGs.
const qrCacheBytes = 8 << 20

var (
	respOK           = newCanned(http.StatusOK, "")
	respBadQR        = newCanned(http.StatusBadRequest, "")
	respNotAccepted  = newCanned(http.StatusNotAcceptable, "406 Not Acceptable: the QR code is served as image/png or image/svg+xml; accept one of them, or ask with ?format=png or ?format=svg\n")
	respQRTooLong    = newCanned(http.StatusInternalServerError, "500 Internal Server Error: the short URL does not fit in a QR code\n")
	hdrVaryAccept    = header{key: []byte("Vary"), value: "Accept"}
	hdrNoSniff       = header{key: []byte("X-Content-Type-Options"), value: "nosniff"}
	hdrImageCSP      = header{key: []byte("Content-Security-Policy"), value: "default-src 'none'; style-src 'unsafe-inline'"}
	qrHeaders        = []header{hdrNoSniff, hdrImageCSP}
	qrHeadersVary    = []header{hdrNoSniff, hdrImageCSP, hdrVaryAccept}
	errFormatUnknown = fmt.Errorf("format must be png or svg")
)

// qrKey is one drawing: the URL and how it is drawn. The image is a function
// of it alone, so the cache needs no invalidation when a link changes: a
// link with a new code has a new URL, and a link that no longer redirects
// is answered before the cache is read.
type qrKey struct {
	url          string
	svg          bool
	size, margin uint16
}

type qrEntry struct {
	key  qrKey
	body []byte
}

// qrCache keeps the drawn QR codes, least recently used first out, within
// a budget of bytes, so that a hot QR code is drawn once.
type qrCache struct {
	mu     sync.Mutex
	budget int
	used   int
	order  *list.List // of *qrEntry, most recent first
	byKey  map[qrKey]*list.Element
	hits   prometheus.Counter
	misses prometheus.Counter
}

func newQRCache(budget int, hits, misses prometheus.Counter) *qrCache {
	return &qrCache{budget: budget, order: list.New(), byKey: map[qrKey]*list.Element{}, hits: hits, misses: misses}
}

// get returns the drawing of k, drawing it on a miss.
func (c *qrCache) get(k qrKey) ([]byte, error) {
	c.mu.Lock()
	if e, ok := c.byKey[k]; ok {
		c.order.MoveToFront(e)
		c.mu.Unlock()
		c.hits.Inc()
		return e.Value.(*qrEntry).body, nil
	}
	c.mu.Unlock()
	c.misses.Inc()
	code, err := qr.Encode(k.url)
	if err != nil {
		return nil, err
	}
	var body []byte
	if k.svg {
		body, err = code.SVG(int(k.size), int(k.margin))
	} else {
		body, err = code.PNG(int(k.size), int(k.margin))
	}
	if err != nil {
		return nil, err
	}
	c.add(k, body)
	return body, nil
}

func (c *qrCache) add(k qrKey, body []byte) {
	cost := len(body) + len(k.url) + 64
	if cost > c.budget {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.byKey[k]; ok {
		return // drawn meanwhile by another request
	}
	c.byKey[k] = c.order.PushFront(&qrEntry{key: k, body: body})
	c.used += cost
	for c.used > c.budget {
		last := c.order.Back()
		e := last.Value.(*qrEntry)
		c.order.Remove(last)
		delete(c.byKey, e.key)
		c.used -= len(e.body) + len(e.key.url) + 64
	}
}

// len is the number of drawings kept.
func (c *qrCache) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.byKey)
}

// headerReader reads request headers; the QR route reads Accept and
// X-Forwarded-Proto through it.
type headerReader interface {
	header(name string) string
}

// qrAnswer answers the QR code of link e (which redirects) named by rt on
// host, drawn as rawQuery asks.
func (r *Redirector) qrAnswer(rt route, e *Link, host, rawQuery string, req requestClock, now int64) answer {
	var hdr headerReader = noHeaders{}
	if h, ok := req.(headerReader); ok {
		hdr = h
	}
	k, negotiated, err := qrParams(rawQuery, hdr.header("Accept"))
	switch {
	case err == errNotAcceptable:
		return answer{resp: respNotAccepted, cacheControl: ccNoStore, extra: []header{hdrVaryAccept}}
	case err != nil:
		return answer{resp: respBadQR, cacheControl: ccNoStore, body: []byte("400 Bad Request: " + err.Error() + "\n")}
	}
	k.url = r.shortURL(rt, host, hdr.header("X-Forwarded-Proto"))
	body, err := r.qr.get(k)
	if err != nil {
		r.log.Error(err, "drawing a QR code", "url", k.url)
		return answer{resp: respQRTooLong, cacheControl: ccNoStore}
	}
	a := answer{resp: respOK, body: body, contentType: contentTypePNG, cacheControl: imageCacheControl(e, now), extra: qrHeaders}
	if k.svg {
		a.contentType = contentTypeSVG
	}
	if negotiated {
		a.extra = qrHeadersVary
	}
	return a
}

type noHeaders struct{}

func (noHeaders) header(string) string { return "" }

// imageCacheControl lets a QR code be cached as long as a permanent
// redirect may be (an hour, no longer than the link lives): it is the
// same image for as long as the link has its code.
func imageCacheControl(e *Link, now int64) string {
	if e.is(flagExpires) {
		if left := (e.until - now) / 1e9; left < permanentMaxAge {
			return ccPermanentPfx + strconv.FormatInt(max(left, 0), 10)
		}
	}
	return ccPermanent
}

var errNotAcceptable = fmt.Errorf("not acceptable")

// qrParams reads the drawing from the query and, without ?format=, from
// the Accept header (negotiated is then true).
func qrParams(rawQuery, accept string) (k qrKey, negotiated bool, err error) {
	q, err := url.ParseQuery(rawQuery)
	if err != nil {
		return k, false, fmt.Errorf("the query string is malformed: %v", err)
	}
	size, margin := qr.DefaultSize, qr.DefaultMargin
	for _, p := range []struct {
		name string
		v    *int
	}{{qrParamSize, &size}, {qrParamMargin, &margin}} {
		if s := q.Get(p.name); s != "" {
			n, err := strconv.Atoi(s)
			if err != nil {
				return k, false, fmt.Errorf("%s must be a whole number, got %q", p.name, s)
			}
			*p.v = n
		}
	}
	if err := qr.CheckSize(size, margin); err != nil {
		return k, false, err
	}
	k.size, k.margin = uint16(size), uint16(margin)
	switch f := q.Get(qrParamFormat); f {
	case "png":
	case "svg":
		k.svg = true
	case "":
		svg, ok := preferSVG(accept)
		if !ok {
			return k, true, errNotAcceptable
		}
		k.svg = svg
		negotiated = true
	default:
		return k, false, fmt.Errorf("%w, got %q", errFormatUnknown, f)
	}
	return k, negotiated, nil
}

// preferSVG reads an Accept header: svg when it gives image/svg+xml a
// higher quality than image/png, png otherwise (and without a header); ok
// is false when it accepts neither.
func preferSVG(accept string) (svg, ok bool) {
	if strings.TrimSpace(accept) == "" {
		return false, true
	}
	png, svgQ := acceptQuality(accept, "image", "png"), acceptQuality(accept, "image", "svg+xml")
	if png <= 0 && svgQ <= 0 {
		return false, false
	}
	return svgQ > png, true
}

// acceptQuality is the quality an Accept header gives type/subtype: that of
// its most specific matching range (RFC 9110, section 12.5.1), 0 if none.
func acceptQuality(accept, typ, subtype string) float64 {
	best, quality := -1, 0.0
	for _, r := range strings.Split(accept, ",") {
		mediaRange, params, _ := strings.Cut(r, ";")
		t, s, _ := strings.Cut(strings.ToLower(strings.TrimSpace(mediaRange)), "/")
		specificity := -1
		switch {
		case t == typ && s == subtype:
			specificity = 2
		case t == typ && s == "*":
			specificity = 1
		case t == "*" && s == "*":
			specificity = 0
		}
		if specificity <= best {
			continue
		}
		q := 1.0
		for _, p := range strings.Split(params, ";") {
			if name, v, ok := strings.Cut(strings.TrimSpace(p), "="); ok && strings.EqualFold(name, "q") {
				if f, err := strconv.ParseFloat(v, 64); err == nil {
					q = f
				}
			}
		}
		best, quality = specificity, q
	}
	return quality
}

// shortURL is the short URL a request for rt's QR code shows: the request's
// URL without /qr, on PublicBaseURL for the long form when it is set. The
// scheme of a URL on the request's host is PublicBaseURL's, else https if
// the proxy in front says so (X-Forwarded-Proto), else http.
func (r *Redirector) shortURL(rt route, host, forwardedProto string) string {
	if base := r.publicBase; base != nil && !rt.vanity {
		return strings.TrimRight(base.String(), "/") + "/" + rt.ns + "/" + rt.code
	}
	scheme := "http"
	switch {
	case r.publicBase != nil:
		scheme = r.publicBase.Scheme
	case strings.EqualFold(strings.TrimSpace(forwardedProto), "https"):
		scheme = "https"
	}
	path := "/" + rt.ns + "/" + rt.code
	if rt.vanity {
		path = "/" + rt.code
	}
	return scheme + "://" + host + path
}
