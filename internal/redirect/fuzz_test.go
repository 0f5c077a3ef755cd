package redirect

import (
	"bytes"
	"context"
	"io"
	"net"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

var (
	statusLine = regexp.MustCompile(`^HTTP/1\.[01] [1-5][0-9]{2} [A-Za-z -]+$`)
	// A Location the redirector sends: http(s), then printable ASCII only.
	safeLocation = regexp.MustCompile(`^https?://[\x21-\x7e]+$`)
)

// fuzzAddr is one server, started by the first input, for all of them.
var (
	fuzzOnce sync.Once
	fuzzAddr string
)

// FuzzServe sends raw bytes to the redirect server over a TCP connection
// and checks every answer: well-formed status lines, a Location only on
// 3xx, only http(s) and only printable ASCII, and Retry-After on a 503. With the seed corpus it runs
// as a normal test.
func FuzzServe(f *testing.F) {
	for _, seed := range []string{
		"GET /ns/a HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /ns/q?a=\xff\x01%zz<>\"{} HTTP/1.1\r\nHost: x\r\n\r\n",
		"HEAD /ns/a HTTP/1.1\r\nHost: x\r\n\r\nGET /ns/q?x=1 HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /ns/a HTTP/1.0\r\nConnection: close, keep-alive\r\n\r\n",
		"POST /ns/a HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n",
		"GET http://go.example.com/a HTTP/1.1\r\nHost: y\r\n\r\n",
		"GET /%6es/a HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabcGET /ns/a HTTP/1.1\r\n\r\n",
		"OPTIONS * HTTP/1.1\r\nHost: x\r\n\r\n",
		"GET /ns/a HTTP/1.1\r\nHost: x\r\nX: " + strings.Repeat("y", 20000) + "\r\n\r\n",
		"\x16\x03\x01\x00\xa5\x01\x00\x00\xa1\x03\x03",
		"GET /ns/a HTTP/1.9\r\nHost: x\r\n\r\n",
		"GET / HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n",
		// QR codes and previews (issue 40): every size, margin and format,
		// hosts that are not ours, HEAD, absolute-form targets.
		"GET /ns/a/qr?size=1024&margin=0&format=svg HTTP/1.1\r\nHost: x\r\nAccept: image/svg+xml\r\n\r\n",
		"GET /ns/a/qr?size=%00&margin=99&format=gif HTTP/1.1\r\nHost: x\r\nAccept: text/html;q=0, */*;q=abc\r\n\r\n",
		"GET /a/qr HTTP/1.1\r\nHost: go.example.com:" + strings.Repeat("9", 2200) + "\r\n\r\n",
		"GET http://evil.example/ns/a/qr?size=64 HTTP/1.1\r\nHost: go.example.com\r\nX-Forwarded-Proto: https\r\n\r\n",
		"HEAD /ns/a/qr?size=777 HTTP/1.1\r\nHost: x\r\n\r\nGET /ns/a+ HTTP/1.1\r\nHost: x\r\n\r\nHEAD /a+ HTTP/1.1\r\nHost: go.example.com\r\n\r\n",
		"GET /a+ HTTP/1.1\r\nHost: user@go.example.com\r\n\r\nGET /a/qr HTTP/1.1\r\nHost: GO.example.com.:80\r\n\r\n",
		"GET /ns/q+?x=<script> HTTP/1.1\r\nHost: x\r\n\r\nGET /ns/nope/qr HTTP/1.1\r\nHost: x\r\n\r\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, input []byte) {
		fuzzOnce.Do(func() {
			h := newHarnessWith(&testing.T{}, Options{PublicBaseURL: "https://go.example.com"})
			h.add(link("ns", "a", "a", "https://example.com/a"))
			h.add(link("ns", "q", "q", "https://example.com/q?k=v#f", func(l *linkv1.ShortLink) { l.Spec.ForwardQuery = true }))
			h.addNS(nsObj("ns", epoch.Add(-time.Hour), "go.example.com"))
			s := NewServer("127.0.0.1:0", h.r, DefaultServerOptions())
			if err := s.Listen(); err != nil {
				panic(err)
			}
			go func() { _ = s.Start(context.Background()) }() // for the whole process: inputs run as subtests
			fuzzAddr = s.Addr().String()
		})
		c, err := net.Dial("tcp", fuzzAddr)
		if err != nil {
			t.Fatal(err)
		}
		defer func() { _ = c.Close() }()
		_ = c.SetDeadline(time.Now().Add(5 * time.Second))
		if _, err := c.Write(input); err != nil {
			return // the server may close on a bad request before reading it all
		}
		_ = c.(*net.TCPConn).CloseWrite()
		out, err := io.ReadAll(c)
		if ne, ok := err.(net.Error); ok && ne.Timeout() {
			t.Fatalf("no answer and no close within 5s; got %q", out)
		}
		checkAnswers(t, out)
	})
}

// checkAnswers checks a stream of responses. A body is skipped by its
// Content-Length unless the next response starts there (the answer to HEAD).
func checkAnswers(t *testing.T, out []byte) {
	t.Helper()
	for len(out) > 0 {
		end := bytes.Index(out, []byte("\r\n\r\n"))
		if end < 0 {
			t.Fatalf("incomplete response head %q", out)
		}
		lines := strings.Split(string(out[:end]), "\r\n")
		out = out[end+4:]
		if !statusLine.MatchString(lines[0]) {
			t.Fatalf("status line %q", lines[0])
		}
		status, _ := strconv.Atoi(lines[0][9:12])
		length, retryAfter := 0, false
		for _, l := range lines[1:] {
			name, value, ok := strings.Cut(l, ": ")
			if !ok {
				t.Fatalf("header line %q", l)
			}
			switch strings.ToLower(name) {
			case "location":
				if status/100 != 3 || !safeLocation.MatchString(value) {
					t.Fatalf("Location %q on %d", value, status)
				}
			case "content-length":
				length, _ = strconv.Atoi(value)
			case "retry-after":
				retryAfter = true
			}
		}
		if status == 503 && !retryAfter {
			t.Fatalf("503 without Retry-After: %q", lines)
		}
		if !bytes.HasPrefix(out, []byte("HTTP/1.")) {
			out = out[min(length, len(out)):]
		}
	}
}
