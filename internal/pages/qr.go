package pages

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"

	"github.com/linkforge/linkforge/internal/qr"
)

// A QR code of a short URL (GET /<namespace>/<code>/qr) is drawn as its
// query string asks (QRParams), and its cost is bounded: the code of a URL
// is encoded once (qrCodeCacheBytes) and drawn at one of qr.SizeBuckets (a
// size asks for the largest bucket not above it), so a link has at most
// 5 sizes x 17 margins x 2 formats drawings, kept in qrDrawingCacheBytes;
// identical misses are drawn once; a miss is drawn only within the render
// budget. Which URL is drawn, and whether at all, is the redirector's.

// Query parameters of the QR route.
const (
	qrParamFormat = "format" // png or svg; default: the Accept header's choice, else png
	qrParamSize   = "size"   // width in pixels, qr.MinSize to qr.MaxSize, drawn at qr.Bucket(size)
	qrParamMargin = "margin" // quiet zone in modules, qr.MinMargin to qr.MaxMargin
)

const (
	contentTypePNG = "image/png"
	contentTypeSVG = "image/svg+xml"
)

const (
	// qrDrawingCacheBytes bounds the drawn QR codes one drawer keeps:
	// 8,000 PNGs of the default size, or 400 of the largest SVGs.
	qrDrawingCacheBytes = 8 << 20
	// qrCodeCacheBytes bounds the encoded codes (module matrices, about
	// 1.5 KB for a short URL): encoding is most of the cost of a drawing.
	qrCodeCacheBytes = 4 << 20
	// qrEntryOverhead is the bookkeeping of a cache entry, in bytes.
	qrEntryOverhead = 96
)

// vary is the Vary header's name.
const vary = "Vary"

var (
	imageCSP = Header{headerCSP, "default-src 'none'; style-src 'unsafe-inline'"}
	// VaryAccept says the answer varies with the Accept header.
	VaryAccept = Header{vary, "Accept"}
	// qrHeaders are the headers of a QR code, by what its body varies with:
	// [Accept chose the format][X-Forwarded-Proto chose the scheme].
	qrHeaders = [2][2][]Header{
		{{NoSniff, imageCSP}, {NoSniff, imageCSP, {vary, "X-Forwarded-Proto"}}},
		{{NoSniff, imageCSP, VaryAccept}, {NoSniff, imageCSP, {vary, "Accept, X-Forwarded-Proto"}}},
	}
	errFormatUnknown = fmt.Errorf("format must be png or svg")
	// ErrNotAcceptable is QRParams' error when the Accept header accepts
	// neither format (406).
	ErrNotAcceptable = fmt.Errorf("not acceptable")
)

// QRHeaders are the headers of a QR code (after its content type): no
// sniffing, no script, and Vary by what chose its body: the Accept header
// (negotiated, as QRParams says) and X-Forwarded-Proto (byProto: it chose
// the scheme of the URL drawn). The caller must not modify them.
func QRHeaders(negotiated, byProto bool) []Header {
	return qrHeaders[b2i(negotiated)][b2i(byProto)]
}

func b2i(b bool) int {
	if b {
		return 1
	}
	return 0
}

// QRKey is one drawing: the URL and how it is drawn. The image is a
// function of it alone, so the cache needs no invalidation when a link
// changes: a link with a new code has a new URL, and a link that no longer
// redirects is answered before the cache is read.
type QRKey struct {
	URL          string
	SVG          bool
	Size, Margin uint16
}

// ContentType is the content type of the drawing of k.
func (k QRKey) ContentType() string {
	if k.SVG {
		return contentTypeSVG
	}
	return contentTypePNG
}

// Counter counts (a prometheus.Counter).
type Counter interface{ Inc() }

// QRMetrics are the counters of a QRDrawer: drawings served from the cache
// (Cached), drawn (Drawn), merged with an identical one in flight
// (Merged), and refused for want of budget (Refused).
type QRMetrics struct {
	Cached, Drawn, Merged, Refused Counter
}

// QRDrawer draws QR codes within the render budget, through its caches.
type QRDrawer struct {
	codes    *lru[string, *qr.Code]
	drawings *lru[QRKey, []byte]
	flights  flights[QRKey, []byte]
	budget   *Budget
	metrics  QRMetrics
	// drawing, if set, is called by each draw before it draws (tests).
	drawing func(QRKey)
}

// NewQRDrawer is a drawer with empty caches that draws within budget and
// counts on m.
func NewQRDrawer(budget *Budget, m QRMetrics) *QRDrawer {
	return &QRDrawer{
		codes: newLRU(qrCodeCacheBytes, func(u string, c *qr.Code) int {
			return len(u) + c.Modules()*c.Modules() + qrEntryOverhead
		}),
		drawings: newLRU(qrDrawingCacheBytes, func(k QRKey, body []byte) int {
			return len(k.URL) + len(body) + qrEntryOverhead
		}),
		budget:  budget,
		metrics: m,
	}
}

// Cached returns the drawing of k if it is kept.
func (d *QRDrawer) Cached(k QRKey) ([]byte, bool) {
	body, ok := d.drawings.get(k)
	if ok {
		d.metrics.Cached.Inc()
	}
	return body, ok
}

// Draw draws k, or waits for the same drawing in flight. Its errors are a
// BusyError (the budget is spent) and qr.ErrTooLong.
func (d *QRDrawer) Draw(k QRKey) ([]byte, error) {
	body, err, merged := d.flights.do(k, func() ([]byte, error) {
		if body, ok := d.drawings.get(k); ok {
			return body, nil // drawn just before this flight began
		}
		release, retryAfter, ok := d.budget.Acquire()
		if !ok {
			d.metrics.Refused.Inc()
			return nil, BusyError{retryAfter}
		}
		defer release()
		if d.drawing != nil {
			d.drawing(k)
		}
		code, ok := d.codes.get(k.URL)
		if !ok {
			var err error
			if code, err = qr.Encode(k.URL); err != nil {
				return nil, err
			}
			d.codes.add(k.URL, code)
		}
		var body []byte
		var err error
		if k.SVG {
			body, err = code.SVG(int(k.Size), int(k.Margin))
		} else {
			body, err = code.PNG(int(k.Size), int(k.Margin))
		}
		if err != nil {
			return nil, err
		}
		d.metrics.Drawn.Inc()
		d.drawings.add(k, body)
		return body, nil
	})
	if merged {
		d.metrics.Merged.Inc()
	}
	return body, err
}

// QRParams reads the drawing from the query (all of the key but its URL)
// and, without ?format=, from the Accept header (negotiated is then true).
// Its errors are ErrNotAcceptable and, for a malformed query, an error
// that says what is wrong in words for the client.
func QRParams(rawQuery, accept string) (k QRKey, negotiated bool, err error) {
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
	k.Size, k.Margin = uint16(qr.Bucket(size)), uint16(margin)
	switch f := q.Get(qrParamFormat); f {
	case "png":
	case "svg":
		k.SVG = true
	case "":
		svg, ok := preferSVG(accept)
		if !ok {
			return k, true, ErrNotAcceptable
		}
		k.SVG = svg
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
