package redirect

import (
	"errors"
	"net/http"
	"strconv"
	"strings"

	"github.com/linkforge/linkforge/internal/pages"
	"github.com/linkforge/linkforge/internal/qr"
)

// GET /<namespace>/<code>/qr (and /<code>/qr on a vanity host) answers a QR
// code of the link's short URL, on a host the operator configured, never on
// one a request names: the long form on Options.PublicBaseURL (without it,
// 404), the vanity form on the domain its namespace claims (without the
// request's port). It answers only while the link redirects (otherwise as
// the link itself: 404 or 410, without fallbacks) and is not a use.
//
// The cost of a QR code is bounded (pages.QRDrawer: cached, merged,
// drawn only within the render budget, else 503 with Retry-After), and it
// is never drawn for HEAD. This file decides which URL is drawn, and
// whether at all.

var (
	respOK          = newCanned(http.StatusOK, "")
	respBadQR       = newCanned(http.StatusBadRequest, "")
	respNotAccepted = newCanned(http.StatusNotAcceptable, "406 Not Acceptable: the QR code is served as image/png or image/svg+xml; accept one of them, or ask with ?format=png or ?format=svg\n")
	respQRTooLong   = newCanned(http.StatusRequestURITooLong, "414 URI Too Long: the short URL does not fit in a QR code\n")
	respQRNoBase    = newCanned(http.StatusNotFound, "404 Not Found: this redirector draws QR codes of /<namespace>/<code> only with --public-base-url set; ask for /<code>/qr on the namespace's own host\n")
	respRenderBusy  = newCanned(http.StatusServiceUnavailable, "503 Service Unavailable: too many QR codes or previews are being drawn; retry shortly (redirects are not affected)\n")
	hdrVaryAccept   = headersOf(pages.VaryAccept)
	// qrHeaders are the headers of a QR code, by what its body varies with:
	// [Accept chose the format][X-Forwarded-Proto chose the scheme].
	qrHeaders = [2][2][]header{
		{headersOf(pages.QRHeaders(false, false)...), headersOf(pages.QRHeaders(false, true)...)},
		{headersOf(pages.QRHeaders(true, false)...), headersOf(pages.QRHeaders(true, true)...)},
	}
)

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
	k, negotiated, err := pages.QRParams(rawQuery, hdr.header("Accept"))
	switch {
	case err == pages.ErrNotAcceptable:
		return answer{resp: respNotAccepted, cacheControl: ccNoStore, extra: hdrVaryAccept}
	case err != nil:
		return answer{resp: respBadQR, cacheControl: ccNoStore, body: []byte("400 Bad Request: " + err.Error() + "\n")}
	}
	u, byProto, ok := r.shortURL(rt, host, hdr.header("X-Forwarded-Proto"))
	if !ok {
		return answer{resp: respQRNoBase, cacheControl: ccNoStore}
	}
	k.URL = u
	a := answer{resp: respOK, contentType: k.ContentType(), cacheControl: imageCacheControl(e, now), extra: qrHeaders[b2i(negotiated)][b2i(byProto)]}
	if body, ok := r.qr.Cached(k); ok {
		a.body = body
		return a
	}
	if head {
		// The headers of the drawing, without drawing it (nor a length).
		return a
	}
	body, err := r.qr.Draw(k)
	var busy pages.BusyError
	switch {
	case errors.As(err, &busy):
		return answer{resp: respRenderBusy, cacheControl: ccNoStore, retryAfter: busyRetryAfter(busy)}
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
