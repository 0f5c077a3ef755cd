package redirect

import (
	"encoding/json"
	"net/http"
	"strconv"
	"time"
)

// Cache-Control policy.
//
//   - 301 and 308 may be cached by clients and shared caches for an hour
//     ("public, max-age=3600"): long enough to spare repeat visits, short enough
//     that an edit of the link reaches everyone within the hour. The max-age
//     is capped by the time left until the link expires, so no cache replays
//     a redirect after the link answers 410. A link with maxUses is never
//     cacheable, since every use must reach a redirector to be counted.
//   - 302 and 307 (and any 301/308 that may not be cached): "private, no-cache".
//   - 404, 405, 410 and 503: "no-store".
const permanentMaxAge = 3600

var (
	hdrText        = []string{"text/plain; charset=utf-8"}
	hdrAllow       = []string{"GET, HEAD"}
	hdrRetry       = []string{"1"}
	ccNoStore      = []string{"no-store"}
	ccNoCache      = []string{"private, no-cache"}
	ccPermanent    = []string{"public, max-age=" + strconv.Itoa(permanentMaxAge)}
	ccPermanentPfx = "public, max-age="
)

// retryAfterValues are the Retry-After headers of 1 to 60 seconds, built
// once so that a 503 does not allocate.
var retryAfterValues = func() (v [61][]string) {
	for i := range v {
		v[i] = []string{strconv.Itoa(max(i, 1))}
	}
	return v
}()

func retryAfterSeconds(s int64) []string {
	return retryAfterValues[min(max(s, 1), 60)]
}

// canned is a response whose status, body and Content-Length are fixed.
type canned struct {
	status int
	body   []byte
	length []string
}

func newCanned(status int, body string) *canned {
	return &canned{status: status, body: []byte(body), length: []string{strconv.Itoa(len(body))}}
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

// ServeHTTP answers GET and HEAD for /<namespace>/<code>, and for /<code> on
// a host that a namespace claims with the linkforge.io/domain annotation.
// It reads the in-memory index only: no API call, no write lock.
func (r *Redirector) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	start := time.Now()
	status, loc := r.serve(w, req, start)
	r.metrics.observe(status, time.Since(start).Seconds())
	if r.accessLog != nil {
		r.logAccess(req, status, loc, start)
	}
}

func (r *Redirector) serve(w http.ResponseWriter, req *http.Request, start time.Time) (int, string) {
	a := r.answer(req.Method, req.Host, req.URL.Path, req.URL.RawQuery, start)
	h := w.Header()
	switch {
	case a.resp == respBadMethod:
		h["Allow"] = hdrAllow
	case a.retryAfter != nil:
		h["Retry-After"] = a.retryAfter
	case a.redirect():
		h["Location"] = []string{a.location}
	}
	return r.write(w, req, a.resp, a.cacheControl), a.location
}

// cacheControl is the Cache-Control of a redirect (see permanentMaxAge).
func cacheControl(e *Link, now int64) []string {
	if st := e.Status(); (st != 301 && st != 308) || e.is(flagMaxUses) {
		return ccNoCache
	}
	if e.is(flagExpires) {
		if left := (e.until - now) / int64(time.Second); left < permanentMaxAge {
			return []string{ccPermanentPfx + strconv.FormatInt(left, 10)}
		}
	}
	return ccPermanent
}

func (r *Redirector) write(w http.ResponseWriter, req *http.Request, c *canned, cc []string) int {
	h := w.Header()
	h["Content-Type"] = hdrText
	h["Content-Length"] = c.length
	h["Cache-Control"] = cc
	w.WriteHeader(c.status)
	if req.Method != http.MethodHead {
		_, _ = w.Write(c.body)
	}
	return c.status
}

// route is routePath of a request.
func (r *Redirector) route(req *http.Request) (ns, code string, ok bool) {
	return r.routePath(req.Host, req.URL.Path)
}

type accessRecord struct {
	Time       string  `json:"time"`
	Remote     string  `json:"remote"`
	Method     string  `json:"method"`
	Host       string  `json:"host"`
	URI        string  `json:"uri"`
	Status     int     `json:"status"`
	Location   string  `json:"location,omitempty"`
	DurationMS float64 `json:"duration_ms"`
	UserAgent  string  `json:"user_agent,omitempty"`
}

func (r *Redirector) logAccess(req *http.Request, status int, loc string, start time.Time) {
	r.logRecord(req.RemoteAddr, req.Method, req.Host, req.RequestURI, req.UserAgent(), status, loc, start)
}

// logRecord writes one access-log line; both front ends call it.
func (r *Redirector) logRecord(remote, method, host, uri, userAgent string, status int, loc string, start time.Time) {
	b, err := json.Marshal(accessRecord{
		Time:       start.UTC().Format(time.RFC3339Nano),
		Remote:     remote,
		Method:     method,
		Host:       host,
		URI:        uri,
		Status:     status,
		Location:   loc,
		DurationMS: float64(time.Since(start).Microseconds()) / 1000,
		UserAgent:  userAgent,
	})
	if err != nil {
		return
	}
	b = append(b, '\n')
	r.accessMu.Lock()
	_, _ = r.accessLog.Write(b)
	r.accessMu.Unlock()
}
