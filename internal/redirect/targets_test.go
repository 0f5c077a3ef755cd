package redirect

import (
	"bufio"
	"net"
	"net/http"
	"testing"
	"time"
)

// oddTargets are request targets whose routing depends on how the front end
// reads them. The answers were recorded from the epoll server this front end
// replaced (which routed as net/http does, on the path url.ParseRequestURI
// decodes), so that the change of server changes none of them, but two
// malformed targets fasthttp refuses before any handler runs (400 where the
// epoll server answered 404 and 302; marked below).
var oddTargets = []struct {
	method, host, target string
	status               int
	location             string
}{
	{"GET", "x", "/team-a/dflt", 302, "https://example.com/default"},
	{"GET", "x", "/team-a%2Fdflt", 302, "https://example.com/default"},
	{"GET", "x", "/team-a%2fdflt", 302, "https://example.com/default"},
	{"GET", "x", "/team-a/%64flt", 302, "https://example.com/default"},
	{"GET", "x", "/%74eam-a/dfl%74", 302, "https://example.com/default"},
	{"GET", "x", "/team-a/dflt%2F", 404, ""},
	{"GET", "x", "//team-a/dflt", 404, ""},
	{"GET", "x", "/team-a//dflt", 404, ""},
	{"GET", "x", "/team-a/./dflt", 404, ""},
	{"GET", "x", "/./team-a/dflt", 404, ""},
	{"GET", "x", "/x/../team-a/dflt", 404, ""},
	{"GET", "x", "/team-a/x/../dflt", 404, ""},
	{"GET", "x", "/team-a/%2E%2E/team-a/dflt", 404, ""},
	{"GET", "x", "/team-a/dflt%3Fq=1", 404, ""},
	{"GET", "x", "/team-a/dflt#frag", 404, ""},
	{"GET", "x", "/team-a/%E2%82%AC", 404, ""},
	{"GET", "x", "/team-a/d%00flt", 404, ""},
	{"GET", "x", "/team-a/d%zzflt", 400, ""},
	{"GET", "x", "/team-a/fq?b=%zz", 302, "https://example.com/p?a=1&b=%25zz#frag"},
	{"GET", "x", "/team-a/fq?", 302, "https://example.com/p?a=1#frag"},
	{"GET", "x", "/team-a/fq?%E2%82%AC=\xe2\x82\xac", 302, "https://example.com/p?a=1&%E2%82%AC=%E2%82%AC#frag"},
	{"GET", "x", "/team-a/fq%3Fb=1?c=2", 404, ""},
	{"GET", "x", "/?x=1", 404, ""},
	{"GET", "x", "?x=1", 400, ""},
	{"GET", "x", "*", 400, ""}, // was 404: '*' is only for OPTIONS
	{"OPTIONS", "x", "*", 200, ""},
	{"OPTIONS", "x", "/team-a/dflt", 405, ""},
	{"GET", "x", "team-a/dflt", 400, ""},
	{"GET", "x", "http://other.example/team-a/dflt", 302, "https://example.com/default"},
	{"GET", "x", "HTTP://other.example/team-a/dflt", 302, "https://example.com/default"},
	{"GET", "x", "https://other.example/team-a/fq?b=2", 302, "https://example.com/p?a=1&b=2#frag"},
	{"GET", "x", "http://go.c.example.com/docs", 302, "https://example.com/c-docs"},
	{"GET", "x", "http://GO.C.example.com:8080/docs", 302, "https://example.com/c-docs"},
	{"GET", "go.c.example.com", "http://other.example/docs", 404, ""},
	{"GET", "go.c.example.com", "/docs", 302, "https://example.com/c-docs"},
	{"GET", "go.c.example.com", "/%64ocs", 302, "https://example.com/c-docs"},
	{"GET", "go.c.example.com", "//docs", 404, ""},
	{"GET", "go.c.example.com", "/docs/", 404, ""},
	{"GET", "x", "http://other.example", 404, ""},
	{"GET", "x", "http:/team-a/dflt", 400, ""}, // was 302: a scheme without an authority
	{"GET", "x", "//other.example/team-a/dflt", 404, ""},
	{"GET", "x", "/team-a/dflt?a=1&a=2#x", 302, "https://example.com/default"},
}

// rawAnswer sends one raw request to addr and returns the status and
// Location of the answer.
func rawAnswer(t *testing.T, addr, method, host, target string) (int, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = c.Close() }()
	_ = c.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := c.Write([]byte(method + " " + target + " HTTP/1.1\r\nHost: " + host + "\r\n\r\n")); err != nil {
		t.Fatal(err)
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), &http.Request{Method: method})
	if err != nil {
		t.Fatalf("%s %q: %v", method, target, err)
	}
	_ = resp.Body.Close()
	return resp.StatusCode, resp.Header.Get("Location")
}

func TestOddTargets(t *testing.T) {
	h := newHarness(t)
	handlerLinks(h)
	addr := startFrontEnd(t, h.r)
	for _, tc := range oddTargets {
		status, loc := rawAnswer(t, addr, tc.method, tc.host, tc.target)
		if status != tc.status || loc != tc.location {
			t.Errorf("%s %q (Host %s): %d %q, want %d %q", tc.method, tc.target, tc.host, status, loc, tc.status, tc.location)
		}
	}
}
