package redirect

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	collogspb "go.opentelemetry.io/proto/otlp/collector/logs/v1"
	"google.golang.org/protobuf/proto"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/clientaddr"
	"github.com/linkforge/linkforge/internal/events"
	"github.com/linkforge/linkforge/internal/gate"
	"github.com/linkforge/linkforge/internal/uses"
)

// gateEventSink keeps the bodies a sink was sent, whole: what the tests
// read the events from, and search for what must not be there.
type gateEventSink struct {
	mu     sync.Mutex
	bodies [][]byte
}

func (s *gateEventSink) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	b, err := io.ReadAll(req.Body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.bodies = append(s.bodies, b)
	s.mu.Unlock()
	if req.URL.Path == "/v1/logs" {
		w.Header().Set("Content-Type", "application/x-protobuf") // an empty ExportLogsServiceResponse
	}
}

func (s *gateEventSink) got() [][]byte {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.bodies)
}

// gateEvent is what a gate's test reads of a click event, from either
// sink: the link's name, the status, and gated and gatePassed ("" when
// absent, else "true" or "false").
type gateEvent struct {
	name, gated, gatePassed string
	status                  int
}

func (e gateEvent) String() string {
	return fmt.Sprintf("{%s %d gated=%q gatePassed=%q}", e.name, e.status, e.gated, e.gatePassed)
}

// ceGateEvents reads the CloudEvents batches.
func ceGateEvents(t *testing.T, bodies [][]byte) []gateEvent {
	t.Helper()
	out := make([]gateEvent, 0, len(bodies))
	for _, b := range bodies {
		var batch []struct {
			Data struct {
				Name       string           `json:"name"`
				Status     int              `json:"status"`
				Gated      *json.RawMessage `json:"gated"`
				GatePassed *json.RawMessage `json:"gatePassed"`
			} `json:"data"`
		}
		if err := json.Unmarshal(b, &batch); err != nil {
			t.Fatalf("a CloudEvents batch: %v\n%s", err, b)
		}
		for _, e := range batch {
			raw := func(m *json.RawMessage) string {
				if m == nil {
					return ""
				}
				return string(*m)
			}
			out = append(out, gateEvent{name: e.Data.Name, status: e.Data.Status, gated: raw(e.Data.Gated), gatePassed: raw(e.Data.GatePassed)})
		}
	}
	return out
}

// otlpGateEvents reads the OTLP requests with the official protos.
func otlpGateEvents(t *testing.T, bodies [][]byte) []gateEvent {
	t.Helper()
	var out []gateEvent
	for _, b := range bodies {
		var req collogspb.ExportLogsServiceRequest
		if err := proto.Unmarshal(b, &req); err != nil {
			t.Fatalf("an OTLP request: %v", err)
		}
		for _, rl := range req.ResourceLogs {
			for _, sl := range rl.ScopeLogs {
				for _, lr := range sl.LogRecords {
					var e gateEvent
					for _, kv := range lr.Attributes {
						switch kv.Key {
						case events.AttrName:
							e.name = kv.Value.GetStringValue()
						case events.AttrStatus:
							e.status = int(kv.Value.GetIntValue())
						case events.AttrGated:
							e.gated = fmt.Sprint(kv.Value.GetBoolValue())
						case events.AttrGatePassed:
							e.gatePassed = fmt.Sprint(kv.Value.GetBoolValue())
						}
					}
					out = append(out, e)
				}
			}
		}
	}
	return out
}

// gateEventsHarness is a harness whose redirector sends click events to
// both sinks, CloudEvents and OTLP (uncompressed: the bytes are searched),
// with a trusted auth proxy and a sign-in URL, a render budget of one
// slot (a test holds it to make a password check busy) and a client
// limited to four password attempts; u counts uses (nil: none).
func gateEventsHarness(t *testing.T, u *uses.Uses) (*harness, *events.Pipeline, *gateEventSink, *gateEventSink) {
	t.Helper()
	ce, otlp := &gateEventSink{}, &gateEventSink{}
	ceSrv, otlpSrv := httptest.NewServer(ce), httptest.NewServer(otlp)
	t.Cleanup(ceSrv.Close)
	t.Cleanup(otlpSrv.Close)
	p, err := events.New(events.Config{CloudEvents: events.CloudEventsConfig{URL: ceSrv.URL}, OTLP: events.OTLPConfig{Endpoint: otlpSrv.URL},
		FlushInterval: 10 * time.Millisecond, Registerer: prometheus.NewRegistry()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close(context.Background()) })
	everyone, err := clientaddr.ParseProxies("0.0.0.0/0,::/0")
	if err != nil {
		t.Fatal(err)
	}
	// RenderCPUShare 1: the budget is paid back faster than one thread
	// spends it, so that only the slot a test holds refuses a check.
	h := newHarnessWith(t, Options{ClickEvents: p, Uses: u, RenderConcurrency: 1, RenderCPUShare: 1,
		AuthUserHeader: "X-Forwarded-User", AuthGroupsHeader: "X-Forwarded-Groups", AuthProxies: everyone,
		SignInURL: "https://auth.example.com/oauth2/start?rd={url}", PublicBaseURL: "https://go.example.com",
		GateLimits: gate.Limits{PerClient: gate.Rate{Burst: 4, Every: time.Hour}, PerLink: gate.Rate{Burst: 100, Every: time.Second}}})
	return h, p, ce, otlp
}

// closeGateEvents delivers what the pipeline holds (Close; its four
// minutes are a backstop, no bound of the code) and returns the bodies.
func closeGateEvents(t *testing.T, p *events.Pipeline, ce, otlp *gateEventSink) ([][]byte, [][]byte) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 4*time.Minute)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatalf("close: %v", err)
	}
	return ce.got(), otlp.got()
}

// TestGateClickEvents: every request to a gated link that is a click has
// an event that says gated, and gatePassed true exactly when the gate let
// it through (the right password's 303, an allowed user's 302), in both
// encodings; the form, a wrong password, one the limiter or the render
// budget did not check, the sign-in redirect, 403, a previewer's card and
// a 410 before the gate say gatePassed false. A password posted is a
// click; HEAD, the QR code and the preview page are not. Clicks on links
// without a gate, and orphans, have neither field.
func TestGateClickEvents(t *testing.T) {
	h, p, ce, otlp := gateEventsHarness(t, nil)
	password := gated(linkv1.LinkAccess{PasswordHash: gatedHash})
	h.add(link("ns", "pw", "p1", secretDestination, password, withCard("Team notes", "", "")))
	h.add(link("ns", "team", "t1", secretDestination, gated(linkv1.LinkAccess{Users: []string{"ana@example.com"}, Groups: []string{"platform"}})))
	h.add(link("ns", "old", "x1", secretDestination, password,
		func(l *linkv1.ShortLink) { l.Spec.ExpiresAt = ptr.To(metav1.NewTime(epoch.Add(-time.Second))) }))
	h.add(link("ns", "open", "o1", "https://example.com/open"))

	const no, passed, notPassed = "", "true", "false"
	var want []gateEvent
	for _, tc := range []struct {
		what       string
		do         func() got
		status     int
		name       string // of the link whose event it is; "-": no event
		gatePassed string // "": no gated nor gatePassed
	}{
		{"the form", func() got { return h.get("GET", "", "/ns/p1", "User-Agent", uaPerson) }, 200, "pw", notPassed},
		{"HEAD", func() got { return h.get("HEAD", "", "/ns/p1", "User-Agent", uaPerson) }, 200, "-", no},
		{"a previewer's card", func() got { return h.get("GET", "", "/ns/p1", "User-Agent", uaPreviewer) }, 200, "pw", notPassed},
		{"the preview page", func() got { return h.get("GET", "", "/ns/p1+", "User-Agent", uaPerson) }, 200, "-", no},
		{"the QR code", func() got { return h.get("GET", "", "/ns/p1/qr", "User-Agent", uaPerson) }, 200, "-", no},
		{"a wrong password", func() got { return h.post("/ns/p1", "hunter2-guess", "User-Agent", uaPerson) }, 200, "pw", notPassed},
		{"the right password", func() got { return h.post("/ns/p1", "open sesame", "User-Agent", uaPerson) }, 303, "pw", passed},
		{"a password the render budget did not check", func() got {
			release, _, ok := h.r.render.Acquire() // the one slot: the check is refused
			if !ok {
				t.Fatal("the render budget is spent")
			}
			defer release()
			return h.post("/ns/p1", "open sesame", "User-Agent", uaPerson)
		}, 503, "pw", notPassed},
		// The one the budget refused was not spent (the limiter's refund):
		// two more take the client's burst of 4.
		{"a third password, wrong", func() got { return h.post("/ns/p1", "hunter2-guess", "User-Agent", uaPerson) }, 200, "pw", notPassed},
		{"a fourth password, wrong", func() got { return h.post("/ns/p1", "hunter2-guess", "User-Agent", uaPerson) }, 200, "pw", notPassed},
		{"a password the limiter did not check", func() got { return h.post("/ns/p1", "open sesame", "User-Agent", uaPerson) }, 200, "pw", notPassed},
		{"an allowed user", func() got { return h.get("GET", "", "/ns/t1", "X-Forwarded-User", "ana@example.com") }, 302, "team", passed},
		{"a member of an allowed group", func() got {
			return h.get("GET", "", "/ns/t1", "X-Forwarded-User", "bo@example.com", "X-Forwarded-Groups", "dev, platform")
		}, 302, "team", passed},
		{"sent to sign in", func() got { return h.get("GET", "", "/ns/t1", "User-Agent", uaPerson) }, 302, "team", notPassed},
		{"signed in, not allowed", func() got { return h.get("GET", "", "/ns/t1", "X-Forwarded-User", "bo@example.com") }, 403, "team", notPassed},
		{"a post to a sign-in gate", func() got { return h.post("/ns/t1", "open sesame") }, 403, "team", notPassed},
		{"a gated link expired", func() got { return h.get("GET", "", "/ns/x1", "User-Agent", uaPerson) }, 410, "old", notPassed},
		{"a link without a gate", func() got { return h.get("GET", "", "/ns/o1", "User-Agent", uaPerson) }, 302, "open", no},
		{"an orphan", func() got { return h.get("GET", "", "/ns/nope", "User-Agent", uaPerson) }, 404, "", no},
	} {
		if g := tc.do(); g.status != tc.status {
			t.Fatalf("%s: %d, want %d\n%s", tc.what, g.status, tc.status, g.body)
		}
		if tc.name == "-" {
			continue // not a click
		}
		e := gateEvent{name: tc.name, status: tc.status, gatePassed: tc.gatePassed}
		if tc.gatePassed != no {
			e.gated = "true"
		}
		want = append(want, e)
	}
	ceBodies, otlpBodies := closeGateEvents(t, p, ce, otlp)
	for sink, got := range map[string][]gateEvent{"CloudEvents": ceGateEvents(t, ceBodies), "OTLP": otlpGateEvents(t, otlpBodies)} {
		if !slices.Equal(got, want) {
			t.Errorf("%s events:\n got %v\nwant %v", sink, got, want)
		}
	}
}

// TestGateEventsHoldNoPassword: the bytes both sinks were sent for posted
// passwords (wrong, right, limited, busy) hold none of them, in any form
// a body or a URL could carry them, nor the link's hash or any part of
// its salt and digest; yet each post is an event, so there were bytes to
// search.
func TestGateEventsHoldNoPassword(t *testing.T) {
	h, p, ce, otlp := gateEventsHarness(t, nil)
	h.add(link("ns", "pw", "p1", secretDestination, gated(linkv1.LinkAccess{PasswordHash: gatedHash})))
	const wrong = "Tr0ub4dor&3 correct horse"
	posts := []string{wrong, "open sesame", wrong}
	for _, pw := range posts {
		h.post("/ns/p1", pw, "User-Agent", uaPerson)
	}
	release, _, ok := h.r.render.Acquire()
	if !ok {
		t.Fatal("the render budget is spent")
	}
	if g := h.post("/ns/p1", "open sesame", "User-Agent", uaPerson); g.status != http.StatusServiceUnavailable {
		t.Fatalf("a post with the render budget held: %d, want 503", g.status)
	}
	release()
	if g := h.post("/ns/p1", wrong, "User-Agent", uaPerson); g.status != http.StatusOK { // the fifth: limited
		t.Fatalf("a post past the limit: %d, want 200", g.status)
	}
	ceBodies, otlpBodies := closeGateEvents(t, p, ce, otlp)
	if n, m := len(ceGateEvents(t, ceBodies)), len(otlpGateEvents(t, otlpBodies)); n != len(posts)+2 || m != n {
		t.Fatalf("%d CloudEvents and %d OTLP events of %d posts", n, m, len(posts)+2)
	}

	secrets := make([]string, 0, 13)
	for _, pw := range []string{wrong, "open sesame"} {
		inJSON, _ := json.Marshal(pw) // "&" is \u0026 there
		secrets = append(secrets, pw, url.QueryEscape(pw), url.PathEscape(pw), strings.ReplaceAll(pw, " ", "+"), strings.Trim(string(inJSON), `"`))
	}
	// The hash whole, and its salt and digest (a bcrypt hash is
	// $2a$cost$ then 22 characters of salt and 31 of digest).
	secrets = append(secrets, gatedHash, gatedHash[len(gatedHash)-53:len(gatedHash)-31], gatedHash[len(gatedHash)-31:])
	for sink, bodies := range map[string][][]byte{"CloudEvents": ceBodies, "OTLP": otlpBodies} {
		all := bytes.Join(bodies, nil)
		for _, s := range secrets {
			if bytes.Contains(all, []byte(s)) {
				t.Errorf("the %s events hold %q", sink, s)
			}
		}
		if bytes.Contains(all, []byte("password")) {
			t.Errorf("the %s events hold the word password: a form field of the post", sink)
		}
	}
}

// TestGateEventsAfterTheGate: what a link answers a request that passed
// its gate says gatePassed true, whatever it is: the right password on a
// single-use link is the use (303), and the right password again passes
// the gate and finds the use spent (410); a wrong one does not pass.
func TestGateEventsAfterTheGate(t *testing.T) {
	once := link("ns", "once", "once1", secretDestination, gated(linkv1.LinkAccess{PasswordHash: gatedHash}),
		func(l *linkv1.ShortLink) { l.Spec.MaxUses = ptr.To[int64](1) })
	once.ResourceVersion = "" // the fake API server's own
	cl := fakeLinkClient(once)
	h, p, ce, otlp := gateEventsHarness(t, uses.New(uses.Options{Client: cl, Holder: "a", Registry: prometheus.NewRegistry()}))
	live := &linkv1.ShortLink{}
	if err := cl.Get(context.Background(), client.ObjectKeyFromObject(once), live); err != nil {
		t.Fatal(err)
	}
	once.ResourceVersion = live.ResourceVersion
	h.add(once)

	want := []gateEvent{
		{name: "once", status: 303, gated: "true", gatePassed: "true"},
		{name: "once", status: 410, gated: "true", gatePassed: "true"},
		{name: "once", status: 200, gated: "true", gatePassed: "false"},
	}
	for i, pw := range []string{"open sesame", "open sesame", "hunter2-guess"} {
		if g := h.post("/ns/once1", pw, "User-Agent", uaPerson); g.status != want[i].status {
			t.Fatalf("post %d: %d, want %d\n%s", i, g.status, want[i].status, g.body)
		}
	}
	ceBodies, otlpBodies := closeGateEvents(t, p, ce, otlp)
	for sink, got := range map[string][]gateEvent{"CloudEvents": ceGateEvents(t, ceBodies), "OTLP": otlpGateEvents(t, otlpBodies)} {
		if !slices.Equal(got, want) {
			t.Errorf("%s events:\n got %v\nwant %v", sink, got, want)
		}
	}
}
