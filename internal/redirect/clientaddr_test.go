package redirect

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/clientaddr"
	"github.com/linkforge/linkforge/internal/events"
	"github.com/linkforge/linkforge/internal/testenv"
)

// trusted is a list of trusted proxies.
func trusted(t testing.TB, list string) clientaddr.Proxies {
	t.Helper()
	p, err := clientaddr.ParseProxies(list)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// abLink splits its clicks 50/50.
func abLink(l *linkv1.ShortLink) {
	l.Spec.Variants = []linkv1.Variant{{URL: "https://example.com/b", Weight: 50}}
}

// TestOneClientAddress (issue 53): a click through a trusted proxy that
// sets X-Forwarded-For or X-Real-IP reaches the split, the click event and
// the access log as the client's address, the same on all three; the
// header of an untrusted peer is ignored, and so are the entries a client
// wrote left of the one the proxy appended. The split is checked against
// the same client's direct clicks: over 200 clients, a split keyed on
// anything else agrees with it for about none of them.
func TestOneClientAddress(t *testing.T) {
	for _, header := range []string{"X-Forwarded-For", "X-Real-IP"} {
		t.Run(header, func(t *testing.T) {
			recv := &clickReceiver{}
			srv := httptest.NewServer(recv)
			t.Cleanup(srv.Close)
			p, err := events.New(events.Config{CloudEvents: events.CloudEventsConfig{URL: srv.URL}, FlushInterval: 10 * time.Millisecond,
				KeepClientAddress: true, Registerer: prometheus.NewRegistry()})
			if err != nil {
				t.Fatal(err)
			}
			log := &testenv.SyncBuffer{}
			h := newHarnessWith(t, Options{ClickEvents: p, AccessLog: log, ClientAddressHeader: header, TrustedProxies: trusted(t, "10.0.0.0/8")})
			h.add(link("ns", "ab", "ab", "https://example.com/a", abLink))
			click := func(peer, value string) (location string) {
				ctx := requestCtx("GET", "x", "/ns/ab")
				ctx.Request.Header.Set("User-Agent", uaDesktop)
				if value != "" {
					ctx.Request.Header.Set(header, value)
				}
				ctx.SetRemoteAddr(&net.TCPAddr{IP: net.ParseIP(peer), Port: 40000})
				h.r.handle(ctx)
				return string(ctx.Response.Header.Peek("Location"))
			}
			const clients = 200
			want := make([]string, 0, 3*clients) // the events' and the access log's client addresses, in order
			for i := range clients {
				client := fmt.Sprintf("203.0.%d.%d", 113+i/250, 1+i%250)
				direct := click(client, "")
				value := client
				if header == "X-Forwarded-For" {
					value = "198.51.100.66, " + client // a client's own entry, left of the proxy's
				}
				viaProxy := click("10.1.2.3", value)
				untrusted := click(client, "198.51.100.66")
				if viaProxy != direct || untrusted != direct {
					t.Fatalf("client %s: direct to %s, through the proxy to %s, with a header from itself to %s", client, direct, viaProxy, untrusted)
				}
				want = append(want, client, client, client)
			}
			if got := counterValue(t, h.r.metrics.fromProxies[clientaddr.Header]); got != clients {
				t.Errorf("client addresses from the proxy's header: %v, want %d", got, clients)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			if err := p.Close(ctx); err != nil {
				t.Fatal(err)
			}
			h.r.Close()
			got := recv.received()
			if len(got) != len(want) {
				t.Fatalf("%d events, want %d", len(got), len(want))
			}
			lines := bytes.Split(bytes.TrimSpace(log.Bytes()), []byte("\n"))
			if len(lines) != len(want) {
				t.Fatalf("%d access-log lines, want %d", len(lines), len(want))
			}
			for i := range want {
				var rec accessRecord
				if err := json.Unmarshal(lines[i], &rec); err != nil {
					t.Fatal(err)
				}
				if got[i].ClientAddress != want[i] || rec.Remote != want[i] {
					t.Fatalf("click %d: event's clientAddress %q, access log's remote %q, want %q", i, got[i].ClientAddress, rec.Remote, want[i])
				}
			}
		})
	}
}

// TestClientAddressFallbacks: a trusted proxy's request without the
// header, with garbage in it, or chunked (whose trailer fasthttp would list
// after the proxy's lines) has the proxy's address, counted; garbage is
// logged. Untrusted peers count nothing.
func TestClientAddressFallbacks(t *testing.T) {
	h := withLog(t, Options{ClientAddressHeader: "X-Forwarded-For", TrustedProxies: trusted(t, "10.0.0.0/8")})
	addr := func(peer string, edit func(ctx *fasthttp.RequestCtx)) string {
		ctx := requestCtx("GET", "x", "/ns/missing")
		ctx.SetRemoteAddr(&net.TCPAddr{IP: net.ParseIP(peer), Port: 40000})
		if edit != nil {
			edit(ctx)
		}
		return h.r.clientAddress(ctx).String()
	}
	set := func(v string) func(*fasthttp.RequestCtx) {
		return func(ctx *fasthttp.RequestCtx) { ctx.Request.Header.Set("X-Forwarded-For", v) }
	}
	if got := addr("10.1.2.3", nil); got != "10.1.2.3" {
		t.Errorf("no header: %s", got)
	}
	if got := addr("10.1.2.3", set("unknown")); got != "10.1.2.3" {
		t.Errorf("garbage: %s", got)
	}
	if got := addr("10.1.2.3", func(ctx *fasthttp.RequestCtx) {
		set("203.0.113.7")(ctx)
		ctx.Request.Header.SetContentLength(-1) // Transfer-Encoding: chunked
	}); got != "10.1.2.3" {
		t.Errorf("chunked: %s", got)
	}
	if got := addr("::ffff:10.1.2.3", set("2001:db8::5, 10.0.0.1")); got != "2001:db8::5" {
		t.Errorf("an IPv4-mapped peer and an IPv6 client: %s", got)
	}
	if got := addr("203.0.113.9", set("10.0.0.1")); got != "203.0.113.9" {
		t.Errorf("untrusted: %s", got)
	}
	for result, want := range map[int]float64{int(clientaddr.Missing): 1, int(clientaddr.Invalid): 1, clientChunked: 1, int(clientaddr.Header): 1} {
		if got := counterValue(t, h.r.metrics.fromProxies[result]); got != want {
			t.Errorf("fromProxies[%d] = %v, want %v", result, got, want)
		}
	}
	if !bytes.Contains(h.log.Bytes(), []byte(`a trusted proxy sent a client-address header that is not a list of addresses`)) ||
		!bytes.Contains(h.log.Bytes(), []byte(`unknown`)) {
		t.Errorf("log %q does not name the invalid header", h.log.Bytes())
	}
}
