package redirect

import (
	"encoding/binary"
	"errors"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"sync"
	"time"
	"unsafe"

	"github.com/valyala/fasthttp"
)

// Cache-Control policy.
//
//   - 301 and 308 may be cached by clients and shared caches for an hour
//     ("public, max-age=3600"): long enough to spare repeat visits, short enough
//     that an edit of the link reaches everyone within the hour. The max-age
//     is capped by the time left until the link expires, so no cache replays
//     a redirect after the link answers 410. A link with maxUses is never
//     cacheable, since every use must reach a redirector to be counted;
//     nor is a link with rules or variants, whose answer depends on who
//     asks (a shared cache would give one client's answer to others).
//   - 302 and 307 (and any 301/308 that may not be cached): "private, no-cache".
//   - 404, 405, 410 and 503: "no-store".
const permanentMaxAge = 3600

var (
	hdrText        = "text/plain; charset=utf-8"
	hdrAllow       = "GET, HEAD"
	hdrRetry       = "1"
	ccNoStore      = "no-store"
	ccNoCache      = "private, no-cache"
	ccPermanent    = "public, max-age=" + strconv.Itoa(permanentMaxAge)
	ccPermanentPfx = "public, max-age="
)

// retryAfterValues are the Retry-After values of 1 to 60 seconds, built
// once so that a 503 does not allocate.
var retryAfterValues = func() (v [61]string) {
	for i := range v {
		v[i] = strconv.Itoa(max(i, 1))
	}
	return v
}()

func retryAfterSeconds(s int64) string {
	return retryAfterValues[min(max(s, 1), 60)]
}

// canned is a response whose status and body are fixed; class is the
// status's class (3 for a redirect), computed once (metrics.count).
type canned struct {
	status int
	class  int
	body   []byte
}

func newCanned(status int, body string) *canned {
	return &canned{status: status, class: statusClass(status), body: []byte(body)}
}

var (
	respNotFound    = newCanned(http.StatusNotFound, "404 Not Found: no such short link\n")
	respGone        = newCanned(http.StatusGone, "410 Gone: this short link has expired or reached its maximum number of uses\n")
	respBadMethod   = newCanned(http.StatusMethodNotAllowed, "405 Method Not Allowed: use GET or HEAD\n")
	respUnavailable = newCanned(http.StatusServiceUnavailable, "503 Service Unavailable: the link cache is not synced yet\n")
	respNoQuota     = newCanned(http.StatusServiceUnavailable, "503 Service Unavailable: this link's use limit is shared by all redirectors and none is free here right now; retry shortly\n")
	resp301         = newCanned(301, "301 Moved Permanently\n")
	resp302         = newCanned(302, "302 Found\n")
	resp307         = newCanned(307, "307 Temporary Redirect\n")
	resp308         = newCanned(308, "308 Permanent Redirect\n")

	// Answers to requests the server cannot read; they close the connection.
	respBadRequest    = newCanned(http.StatusBadRequest, "400 Bad Request\n")
	respTimeout       = newCanned(http.StatusRequestTimeout, "408 Request Timeout\n")
	respBodyTooLarge  = newCanned(http.StatusRequestEntityTooLarge, "413 Request Entity Too Large\n")
	respHeadTooLarge  = newCanned(http.StatusRequestHeaderFieldsTooLarge, "431 Request Header Fields Too Large\n")
	respOptionsServer = newCanned(http.StatusOK, "")
)

func redirectResponse(status int) *canned {
	switch status {
	case 301:
		return resp301
	case 307:
		return resp307
	case 308:
		return resp308
	}
	return resp302
}

// cacheControl is the Cache-Control of a redirect (see permanentMaxAge).
func cacheControl(e *Link, now int64) string {
	if st := e.Status(); (st != 301 && st != 308) || e.is(flagMaxUses) || e.is(flagRouted) && !e.more.routing.Plain() {
		return ccNoCache
	}
	if e.is(flagExpires) {
		if left := (e.until - now) / int64(time.Second); left < permanentMaxAge {
			return ccPermanentPfx + strconv.FormatInt(left, 10)
		}
	}
	return ccPermanent
}

// handle is the fasthttp handler of the redirect port: GET and HEAD for
// /<namespace>/<code> (and its /qr and + views), and for /<code> on a host
// that a namespace claims with the linkforge.io/domain annotation. It reads
// the in-memory index only: no API call, no write lock, and on a redirect no
// allocation.
func (r *Redirector) handle(ctx *fasthttp.RequestCtx) {
	at := ctxClock{ctx}
	if r.accessLog != nil {
		at.Time() // the log's duration runs from here
	}
	method := bstr(ctx.Method())
	target := bstr(ctx.Request.Header.RequestURI())
	var a answer
	switch path, rawQuery, host, ok := requestTarget(target, bstr(ctx.Request.Header.Host())); {
	case !ok:
		a = answer{resp: respBadRequest, cacheControl: ccNoStore}
		ctx.SetConnectionClose()
		r.refused(http.StatusBadRequest, ctx.RemoteAddr(), "the request target is not a URL")
	case target == "*" && method == "OPTIONS":
		// The server's own options, as net/http answers them.
		a = answer{resp: respOptionsServer}
	default:
		a = r.answer(method, host, path, rawQuery, at)
		if r.opts.ClickEvents != nil {
			r.click(ctx, method, path, &a)
		}
	}
	writeAnswer(ctx, &a)
	r.metrics.count(a.resp.class)
	if r.accessLog != nil {
		r.accessLog.record(ctx, r.client(ctx, &a), a.resp.status, a.location, at.Time())
	}
}

// ctxClock is the time of a fasthttp request: read at most once, when first
// asked (the server sets LazyRequestTime), or now for a RequestCtx that no
// fasthttp.Server runs.
type ctxClock struct{ ctx *fasthttp.RequestCtx }

// header is a request header of the request (headerReader), for the routes
// that read one (the QR code's Accept).
func (c ctxClock) header(name string) string {
	return string(c.ctx.Request.Header.Peek(name))
}

func (c ctxClock) Time() time.Time {
	if t := c.ctx.Time(); !t.IsZero() {
		return t
	}
	return time.Now()
}

// Response header names as fasthttp sends them: SetCanonical skips the
// normalization Set does on every call.
var (
	hdrKeyAllow        = []byte("Allow")
	hdrKeyRetryAfter   = []byte("Retry-After")
	hdrKeyLocation     = []byte("Location")
	hdrKeyCacheControl = []byte("Cache-Control")
)

// writeAnswer sets the response of a.
func writeAnswer(ctx *fasthttp.RequestCtx, a *answer) {
	h := &ctx.Response.Header
	h.SetStatusCode(a.resp.status)
	switch {
	case a.redirect(): // first: the answer of almost every request
		h.SetCanonical(hdrKeyLocation, sbytes(a.location))
	case a.resp == respBadMethod:
		h.SetCanonical(hdrKeyAllow, sbytes(hdrAllow))
	case a.retryAfter != "":
		h.SetCanonical(hdrKeyRetryAfter, sbytes(a.retryAfter))
	}
	if a.resp != respOptionsServer {
		if a.contentType != "" {
			h.SetContentType(a.contentType)
		} else {
			h.SetContentType(hdrText)
		}
		h.SetCanonical(hdrKeyCacheControl, sbytes(a.cacheControl))
	}
	for i := range a.extra {
		h.SetCanonical(a.extra[i].key, sbytes(a.extra[i].value))
	}
	// HEAD: fasthttp sends the Content-Length of this body, not the body.
	if a.body != nil {
		ctx.Response.SetBodyRaw(a.body)
		return
	}
	ctx.Response.SetBodyRaw(a.resp.body)
}

// serveError answers a request fasthttp could not read (fasthttp closes
// the connection after it), and counts and logs it (sampled).
func (r *Redirector) serveError(ctx *fasthttp.RequestCtx, err error) {
	resp := respBadRequest
	var small *fasthttp.ErrSmallBuffer
	var netErr net.Error
	switch {
	case errors.As(err, &small):
		resp = respHeadTooLarge
	case errors.Is(err, fasthttp.ErrBodyTooLarge):
		resp = respBodyTooLarge
	case errors.As(err, &netErr) && netErr.Timeout():
		resp = respTimeout
	}
	ctx.Response.Reset()
	writeAnswer(ctx, &answer{resp: resp, cacheControl: ccNoStore})
	r.refused(resp.status, ctx.RemoteAddr(), err.Error())
}

// refusedLogEvery is how often a refused request is logged at most: a
// client that sends garbage fast must not fill the log.
const refusedLogEvery = 10 * time.Second

// maxLoggedReason bounds the error text logged of a refused request.
const maxLoggedReason = 200

// refused counts a request the server could not read, and logs the first
// in each refusedLogEvery with the number not logged before it.
func (r *Redirector) refused(status int, remote net.Addr, reason string) {
	if c := r.metrics.refused[status]; c != nil {
		c.Inc()
	}
	unlogged, ok := r.refusedLog.allow(time.Now())
	if !ok {
		return
	}
	if len(reason) > maxLoggedReason {
		reason = reason[:maxLoggedReason] + "..."
	}
	r.log.Info("refused a request the server could not read", "status", status, "remote", loggedAddress(remote, r.opts.AccessLogKeepClientAddress),
		"reason", strconv.QuoteToASCII(reason), "unloggedBefore", unlogged)
}

// sampler lets one event through per interval and counts the others.
type sampler struct {
	every time.Duration

	mu      sync.Mutex
	last    time.Time
	skipped int
}

// allow reports whether the event at now is let through, and how many
// were not since the last one that was.
func (s *sampler) allow(now time.Time) (skipped int, ok bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.last.IsZero() && now.Sub(s.last) < s.every {
		s.skipped++
		return 0, false
	}
	skipped, s.skipped, s.last = s.skipped, 0, now
	return skipped, true
}

// Classes of the bytes of a request target, for requestTarget's fast path:
// a control byte, space or DEL anywhere, or a '%' before the query, takes
// the slow path (net/url); the first '?' starts the query.
const (
	targetCtl   uint8 = iota // < 0x21 or 0x7f
	targetPlain              // any other byte
	targetPct                // '%'
	targetQuery              // '?'
)

var targetBytes = func() (t [256]uint8) {
	for c := range t {
		if c >= 0x21 && c != 0x7f {
			t[c] = targetPlain
		}
	}
	t['%'], t['?'] = targetPct, targetQuery
	return t
}()

// requestTarget reads a request target as net/http does (url.ParseRequestURI):
// the path it routes on (decoded), the raw query, and the host, which is the
// target's own for an absolute-form target and the Host header's otherwise.
// The common case, an origin-form target without escapes or control bytes
// before its query (nor control bytes in it), is sliced directly, without
// allocating, by one look at a table per byte. ok is false for a target
// net/url rejects (400).
func requestTarget(target, hostHeader string) (path, rawQuery, host string, ok bool) {
	if len(target) == 0 || target[0] != '/' {
		return parseTarget(target, hostHeader)
	}
	i := 1
	for ; i+8 <= len(target); i += 8 {
		if !plainWord(binary.LittleEndian.Uint64(sbytes(target[i:]))) {
			break
		}
	}
	for i < len(target) && targetBytes[target[i]] == targetPlain {
		i++
	}
	if i == len(target) {
		return target, "", hostHeader, true
	}
	if target[i] != '?' {
		return parseTarget(target, hostHeader) // a control byte or an escape
	}
	for j := i + 1; j < len(target); j++ {
		if targetBytes[target[j]] == targetCtl {
			return parseTarget(target, hostHeader)
		}
	}
	return target[:i], target[i+1:], hostHeader, true
}

// Words of eight bytes, for plainWord.
const (
	wordOnes  = 0x0101010101010101
	wordHighs = 0x8080808080808080
)

// plainWord reports whether the eight bytes of w (a word of a request
// target) are all targetPlain: none below 0x21, none 0x7f, '%' or '?'.
// Eight bytes at a time, where requestTarget's table costs about ten
// instructions a byte. hasZero(x) is non-zero if and only if a byte of x
// is zero (it may flag more bytes than those, above one that is, which
// does not matter here); x-ones*0x21 &^ x has a byte's high bit set for
// the bytes of x below 0x21 (and, like hasZero, above them), and never
// for one of 0x80 or more. '?' (0x3f) and 0x7f are the two bytes that
// setting bit 0x40 makes 0x7f: one test for both.
func plainWord(w uint64) bool {
	hasZero := func(x uint64) uint64 { return (x - wordOnes) &^ x }
	special := (w-wordOnes*0x21)&^w |
		hasZero((w|wordOnes*0x40)^(wordOnes*0x7f)) | hasZero(w^(wordOnes*'%'))
	return special&wordHighs == 0
}

// parseTarget is requestTarget's slow path: net/url.
func parseTarget(target, hostHeader string) (path, rawQuery, host string, ok bool) {
	u, err := url.ParseRequestURI(target)
	if err != nil {
		return "", "", "", false
	}
	host = hostHeader
	if u.Host != "" {
		host = u.Host
	}
	return u.Path, u.RawQuery, host, true
}

// sbytes is s as bytes without a copy, for fasthttp setters that copy their
// argument; they must not be written to.
func sbytes(s string) []byte { return unsafe.Slice(unsafe.StringData(s), len(s)) }

// bstr is b as a string without a copy; it aliases b, so it must not outlive
// the request (answer keeps none of its arguments).
func bstr(b []byte) string { return unsafe.String(unsafe.SliceData(b), len(b)) }
