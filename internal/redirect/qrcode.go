package redirect

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/linkforge/linkforge/internal/qr"
)

// GET /<namespace>/<code>/qr (and /<code>/qr on a vanity host) answers a QR
// code of the link's short URL, on a host the operator configured, never on
// one a request names: the long form on Options.PublicBaseURL (without it,
// 404), the vanity form on the domain its namespace claims (without the
// request's port). It answers only while the link redirects (otherwise as
// the link itself: 404 or 410, without fallbacks) and is not a use.
//
// The cost of a QR code is bounded (render.go): the code of a URL is
// encoded once (qrCodeCacheBytes) and drawn at one of qr.SizeBuckets (a
// size asks for the largest bucket not above it), so a link has at most
// 5 sizes x 17 margins x 2 formats drawings, kept in qrDrawingCacheBytes;
// identical misses are drawn once; a miss is drawn only within the render
// budget (else 503 with Retry-After), and never for HEAD.

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
	// qrDrawingCacheBytes bounds the drawn QR codes one redirector keeps:
	// 8,000 PNGs of the default size, or 400 of the largest SVGs.
	qrDrawingCacheBytes = 8 << 20
	// qrCodeCacheBytes bounds the encoded codes (module matrices, about
	// 1.5 KB for a short URL): encoding is most of the cost of a drawing.
	qrCodeCacheBytes = 4 << 20
	// qrEntryOverhead is the bookkeeping of a cache entry, in bytes.
	qrEntryOverhead = 96
)

var (
	respOK          = newCanned(http.StatusOK, "")
	respBadQR       = newCanned(http.StatusBadRequest, "")
	respNotAccepted = newCanned(http.StatusNotAcceptable, "406 Not Acceptable: the QR code is served as image/png or image/svg+xml; accept one of them, or ask with ?format=png or ?format=svg\n")
	respQRTooLong   = newCanned(http.StatusRequestURITooLong, "414 URI Too Long: the short URL does not fit in a QR code\n")
	respQRNoBase    = newCanned(http.StatusNotFound, "404 Not Found: this redirector draws QR codes of /<namespace>/<code> only with --public-base-url set; ask for /<code>/qr on the namespace's own host\n")
	respRenderBusy  = newCanned(http.StatusServiceUnavailable, "503 Service Unavailable: too many QR codes or previews are being drawn; retry shortly (redirects are not affected)\n")
	hdrNoSniff      = header{key: []byte("X-Content-Type-Options"), value: "nosniff"}
	hdrImageCSP     = header{key: []byte("Content-Security-Policy"), value: "default-src 'none'; style-src 'unsafe-inline'"}
	hdrVaryAccept   = header{key: []byte("Vary"), value: "Accept"}
	// qrHeaders are the headers of a QR code, by what its body varies with:
	// [Accept chose the format][X-Forwarded-Proto chose the scheme].
	qrHeaders = [2][2][]header{
		{{hdrNoSniff, hdrImageCSP}, {hdrNoSniff, hdrImageCSP, {key: []byte("Vary"), value: "X-Forwarded-Proto"}}},
		{{hdrNoSniff, hdrImageCSP, hdrVaryAccept}, {hdrNoSniff, hdrImageCSP, {key: []byte("Vary"), value: "Accept, X-Forwarded-Proto"}}},
	}
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

// busyError refuses a render for want of budget.
type busyError struct{ retryAfter time.Duration }

func (e busyError) Error() string { return "the render budget is spent" }

// qrDrawer draws QR codes within the render budget, through its caches.
type qrDrawer struct {
	codes    *lru[string, *qr.Code]
	drawings *lru[qrKey, []byte]
	flights  flights[qrKey, []byte]
	budget   *renderBudget
	metrics  *metrics
	// drawing, if set, is called by each draw before it draws (tests).
	drawing func(qrKey)
}

func newQRDrawer(budget *renderBudget, m *metrics) *qrDrawer {
	return &qrDrawer{
		codes: newLRU(qrCodeCacheBytes, func(u string, c *qr.Code) int {
			return len(u) + c.Modules()*c.Modules() + qrEntryOverhead
		}),
		drawings: newLRU(qrDrawingCacheBytes, func(k qrKey, body []byte) int {
			return len(k.url) + len(body) + qrEntryOverhead
		}),
		budget:  budget,
		metrics: m,
	}
}

// cached returns the drawing of k if it is kept.
func (d *qrDrawer) cached(k qrKey) ([]byte, bool) {
	body, ok := d.drawings.get(k)
	if ok {
		d.metrics.qrCached.Inc()
	}
	return body, ok
}

// draw draws k, or waits for the same drawing in flight. Its errors are a
// busyError (the budget is spent) and qr.ErrTooLong.
func (d *qrDrawer) draw(k qrKey) ([]byte, error) {
	body, err, merged := d.flights.do(k, func() ([]byte, error) {
		if body, ok := d.drawings.get(k); ok {
			return body, nil // drawn just before this flight began
		}
		release, retryAfter, ok := d.budget.acquire()
		if !ok {
			d.metrics.renderRefused[viewQR].Inc()
			return nil, busyError{retryAfter}
		}
		defer release()
		if d.drawing != nil {
			d.drawing(k)
		}
		code, ok := d.codes.get(k.url)
		if !ok {
			var err error
			if code, err = qr.Encode(k.url); err != nil {
				return nil, err
			}
			d.codes.add(k.url, code)
		}
		var body []byte
		var err error
		if k.svg {
			body, err = code.SVG(int(k.size), int(k.margin))
		} else {
			body, err = code.PNG(int(k.size), int(k.margin))
		}
		if err != nil {
			return nil, err
		}
		d.metrics.qrDrawn.Inc()
		d.drawings.add(k, body)
		return body, nil
	})
	if merged {
		d.metrics.qrMerged.Inc()
	}
	return body, err
}

// headerReader reads request headers; the QR route reads Accept and
// X-Forwarded-Proto through it.
type headerReader interface {
	header(name string) string
}

// qrAnswer answers the QR code of link e (which redirects) named by rt on
// host, drawn as rawQuery asks; for HEAD without drawing it.
func (r *Redirector) qrAnswer(rt route, e *Link, host, rawQuery string, head bool, req requestClock, now int64) answer {
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
	u, byProto, ok := r.shortURL(rt, host, hdr.header("X-Forwarded-Proto"))
	if !ok {
		return answer{resp: respQRNoBase, cacheControl: ccNoStore}
	}
	k.url = u
	a := answer{resp: respOK, contentType: contentTypePNG, cacheControl: imageCacheControl(e, now), extra: qrHeaders[b2i(negotiated)][b2i(byProto)]}
	if k.svg {
		a.contentType = contentTypeSVG
	}
	if body, ok := r.qr.cached(k); ok {
		a.body = body
		return a
	}
	if head {
		// The headers of the drawing, without drawing it (nor a length).
		return a
	}
	body, err := r.qr.draw(k)
	var busy busyError
	switch {
	case errors.As(err, &busy):
		return answer{resp: respRenderBusy, cacheControl: ccNoStore, retryAfter: retryAfterSeconds(int64((busy.retryAfter + time.Second - 1) / time.Second))}
	case errors.Is(err, qr.ErrTooLong):
		// The URL is the operator's base and the client's code: a client error.
		return answer{resp: respQRTooLong, cacheControl: ccNoStore}
	case err != nil:
		r.log.Error(err, "drawing a QR code", "namespace", rt.ns, "code", rt.code)
		return answer{resp: respInternal, cacheControl: ccNoStore}
	}
	a.body = body
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
	k.size, k.margin = uint16(qr.Bucket(size)), uint16(margin)
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

// shortURL is the short URL a QR code of rt shows, on a host the operator
// vouches for: the long form on PublicBaseURL (ok is false without it),
// the vanity form on the domain rt's namespace claims, which is the
// request's host once normalized (domains.go; no port, no userinfo). The
// vanity form's scheme is PublicBaseURL's, else https when the proxy in
// front says so (X-Forwarded-Proto; byProto: the answer varies by it),
// else http.
func (r *Redirector) shortURL(rt route, host, forwardedProto string) (u string, byProto, ok bool) {
	if !rt.vanity {
		if r.publicBase == nil {
			return "", false, false
		}
		return strings.TrimRight(r.publicBase.String(), "/") + "/" + rt.ns + "/" + rt.code, false, true
	}
	domain := normalizeHost(host)
	if ns, claimed := r.domains.Lookup(domain); !claimed || ns != rt.ns {
		return "", false, false
	}
	scheme := "http"
	switch {
	case r.publicBase != nil:
		scheme = r.publicBase.Scheme
	case strings.EqualFold(strings.TrimSpace(forwardedProto), "https"):
		scheme, byProto = "https", true
	default:
		byProto = true
	}
	return scheme + "://" + domain + "/" + rt.code, byProto, true
}
