package peer

import (
	"context"
	"testing"
	"time"

	"github.com/valyala/fasthttp"

	"github.com/linkforge/linkforge/internal/uses"
)

// endless is a Taker that always serves.
type endless struct{}

func (endless) TakeForPeer(string, string, uint64) Result { return Served }

// BenchmarkForward is a forwarded use over loopback, one at a time: the
// protocol as shipped (MACs both ways, the replay check) against the same
// round trip without authentication (the protocol before it, as a
// baseline measured in the same run).
//
//	go test ./internal/peer -run '^$' -bench Forward -count 5
func BenchmarkForward(b *testing.B) {
	b.Run("authenticated", func(b *testing.B) {
		key := testKey(b)
		addr := serve(b, endless{}, ServerOptions{Keyring: StaticKeyring(key)})
		c := NewClient(ClientOptions{Keyring: StaticKeyring(key), AllowLocal: true})
		to := uses.Holder{Name: "a", Peer: addr}
		b.ReportAllocs()
		for b.Loop() {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			if got := c.TakeFrom(ctx, to, link); got != uses.ForwardServed {
				b.Fatal(got)
			}
			cancel()
		}
	})
	b.Run("unauthenticated", func(b *testing.B) {
		addr := serveRaw(b, func(ctx *fasthttp.RequestCtx) {
			if _, _, _, ok := parsePath(ctx.Path()); ok && endless.TakeForPeer(endless{}, "", "", 0) == Served {
				ctx.Response.Header.Set(headerUse, "served")
				ctx.SetStatusCode(fasthttp.StatusNoContent)
			}
		})
		c := &fasthttp.Client{NoDefaultUserAgentHeader: true, MaxConnsPerHost: MaxConnsPerHost}
		b.ReportAllocs()
		for b.Loop() {
			req, resp := fasthttp.AcquireRequest(), fasthttp.AcquireResponse()
			req.Header.SetMethod("POST")
			req.SetRequestURI("http://" + addr + pathPrefix + "ns/code1/42")
			if err := c.DoDeadline(req, resp, time.Now().Add(5*time.Second)); err != nil || string(resp.Header.Peek(headerUse)) != "served" {
				b.Fatal(err)
			}
			fasthttp.ReleaseRequest(req)
			fasthttp.ReleaseResponse(resp)
		}
	})
}
