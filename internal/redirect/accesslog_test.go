package redirect

import (
	"encoding/json"
	"net"
	"strings"
	"testing"

	"github.com/go-logr/logr/funcr"

	"github.com/linkforge/linkforge/internal/testenv"
)

// TestAccessLogClientAddress: the access log and the line of a refused
// request have the client's network (events.ReduceClientAddress: no port,
// an IPv4 address's /24, IPv6 /32, 6to4's IPv4 /24), or with
// AccessLogKeepClientAddress the address and port whole.
func TestAccessLogClientAddress(t *testing.T) {
	for _, tc := range []struct {
		remote        string
		keep          bool
		want, wantNot string
	}{
		{"198.51.100.23", false, "198.51.100.0", "198.51.100.23"},
		{"2001:db8:abcd:12::7", false, "2001:db8::", "abcd"},
		{"2002:c633:6417::1", false, "198.51.100.0", "2002"},
		{"::ffff:198.51.100.23", false, "198.51.100.0", "198.51.100.23"},
		{"198.51.100.23", true, "198.51.100.23:40000", "198.51.100.0"},
		{"2002:c633:6417::1", true, "[2002:c633:6417::1]:40000", "198.51.100.0"},
	} {
		out, logged := &testenv.SyncBuffer{}, &testenv.SyncBuffer{}
		log := funcr.New(func(prefix, args string) { _, _ = logged.Write([]byte(args + "\n")) }, funcr.Options{})
		h := newHarnessWith(t, Options{AccessLog: out, AccessLogKeepClientAddress: tc.keep, Log: log})
		h.add(link("ns", "a", "a", "https://example.com/a"))
		for _, target := range []string{"/ns/a?x=1", "/%zz"} {
			ctx := requestCtx("GET", "x", target)
			ctx.SetRemoteAddr(&net.TCPAddr{IP: net.ParseIP(tc.remote), Port: 40000})
			h.r.handle(ctx)
		}
		h.r.Close() // writes out the queued records
		lines := strings.Split(strings.TrimSpace(string(out.Bytes())), "\n")
		if len(lines) != 2 {
			t.Fatalf("%s: access log %q: want 2 lines", tc.remote, out.Bytes())
		}
		for _, line := range lines {
			var rec accessRecord
			if err := json.Unmarshal([]byte(line), &rec); err != nil {
				t.Fatalf("access log %q: %v", line, err)
			}
			if rec.Remote != tc.want {
				t.Errorf("%s, keep %v: remote %q, want %q", tc.remote, tc.keep, rec.Remote, tc.want)
			}
		}
		refused := string(logged.Bytes())
		if !strings.Contains(refused, `"remote"="`+tc.want+`"`) || strings.Contains(refused, tc.wantNot) {
			t.Errorf("%s, keep %v: the refused request's log line %q: want remote %q", tc.remote, tc.keep, refused, tc.want)
		}
	}
}
