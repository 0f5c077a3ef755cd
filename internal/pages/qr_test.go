package pages

import (
	"bytes"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/onsi/gomega"

	"github.com/linkforge/linkforge/internal/qr"
	"github.com/linkforge/linkforge/internal/qr/qrtest"
)

// counter is a Counter the tests read.
type counter struct{ n atomic.Int64 }

func (c *counter) Inc()       { c.n.Add(1) }
func (c *counter) get() int64 { return c.n.Load() }

type qrCounters struct{ cached, drawn, merged, refused counter }

func newTestDrawer(slots int) (*QRDrawer, *qrCounters) {
	c := &qrCounters{}
	return NewQRDrawer(NewBudget(slots, 1, time.Now), QRMetrics{Cached: &c.cached, Drawn: &c.drawn, Merged: &c.merged, Refused: &c.refused}), c
}

func TestQRDrawerCaches(t *testing.T) {
	d, c := newTestDrawer(1)
	k := QRKey{URL: "https://go.example.com/team-a/LUMLV6n3To", Size: qr.DefaultSize, Margin: qr.DefaultMargin}
	if _, ok := d.Cached(k); ok {
		t.Fatal("cached before it was drawn")
	}
	body, err := d.Draw(k)
	if err != nil || qrtest.ScanPNG(t, body) != k.URL {
		t.Fatalf("%v, scanned %q", err, qrtest.ScanPNG(t, body))
	}
	if cached, ok := d.Cached(k); !ok || !bytes.Equal(cached, body) {
		t.Error("not cached once drawn")
	}
	svg := k
	svg.SVG = true
	if body, err := d.Draw(svg); err != nil || !bytes.Contains(body, []byte("<svg")) {
		t.Errorf("svg: %v %.60q", err, body)
	}
	if k.ContentType() != "image/png" || svg.ContentType() != "image/svg+xml" {
		t.Errorf("content types %q %q", k.ContentType(), svg.ContentType())
	}
	if c.drawn.get() != 2 || c.cached.get() != 1 || c.merged.get() != 0 || c.refused.get() != 0 {
		t.Errorf("drawn %d cached %d merged %d refused %d", c.drawn.get(), c.cached.get(), c.merged.get(), c.refused.get())
	}
	if _, err := d.Draw(QRKey{URL: "https://go.example.com/" + strings.Repeat("p", 4000), Size: qr.DefaultSize}); !errors.Is(err, qr.ErrTooLong) {
		t.Errorf("too long: %v", err)
	}
}

func TestQRDrawerMergesIdenticalMisses(t *testing.T) {
	d, c := newTestDrawer(4)
	started, gate := make(chan QRKey, 16), make(chan struct{})
	var drawn atomic.Bool
	d.drawing = func(k QRKey) {
		started <- k
		if !drawn.Swap(true) {
			<-gate
		}
	}
	defer func() {
		select {
		case <-gate:
		default:
			close(gate)
		}
	}()
	const clients = 5
	k := QRKey{URL: "https://go.example.com/team-a/LUMLV6n3To", Size: 512, Margin: 2}
	bodies := make(chan []byte, clients)
	for range clients {
		go func() {
			body, err := d.Draw(k)
			if err != nil {
				t.Error(err)
			}
			bodies <- body
		}()
	}
	<-started
	// The other four wait for the draw in flight instead of drawing.
	gomega.NewWithT(t).Eventually(func() int { return d.flights.waiting(k) }).WithTimeout(10*time.Second).
		Should(gomega.Equal(clients-1), "waiting for the draw in flight")
	close(gate)
	first := <-bodies
	for range clients - 1 {
		if b := <-bodies; !bytes.Equal(b, first) || len(b) == 0 {
			t.Error("the merged answers differ")
		}
	}
	if c.drawn.get() != 1 || c.merged.get() != clients-1 {
		t.Errorf("drawn %d, merged %d; want 1 and %d", c.drawn.get(), c.merged.get(), clients-1)
	}
}

func TestQRDrawerRefusedBeyondBudget(t *testing.T) {
	d, c := newTestDrawer(1)
	release, _, ok := d.budget.Acquire()
	if !ok {
		t.Fatal("refused")
	}
	defer release()
	var busy BusyError
	if _, err := d.Draw(QRKey{URL: "https://go.example.com/x", Size: qr.DefaultSize}); !errors.As(err, &busy) || busy.RetryAfter < time.Second {
		t.Errorf("%v, want a BusyError", err)
	}
	if c.refused.get() != 1 || c.drawn.get() != 0 {
		t.Errorf("refused %d, drawn %d", c.refused.get(), c.drawn.get())
	}
}

func TestQRParams(t *testing.T) {
	for _, c := range []struct {
		query, accept string
		want          QRKey
		negotiated    bool
		err           string
	}{
		{"", "", QRKey{Size: uint16(qr.Bucket(qr.DefaultSize)), Margin: qr.DefaultMargin}, true, ""},
		{"format=svg&size=512&margin=0", "image/png", QRKey{SVG: true, Size: 512, Margin: 0}, false, ""},
		{"format=png", "image/svg+xml", QRKey{Size: uint16(qr.Bucket(qr.DefaultSize)), Margin: qr.DefaultMargin}, false, ""},
		{"", "image/svg+xml", QRKey{SVG: true, Size: uint16(qr.Bucket(qr.DefaultSize)), Margin: qr.DefaultMargin}, true, ""},
		{"", "image/png;q=0.5, image/svg+xml;q=0.9", QRKey{SVG: true, Size: uint16(qr.Bucket(qr.DefaultSize)), Margin: qr.DefaultMargin}, true, ""},
		{"", "image/*;q=0.8, image/svg+xml;q=0.5", QRKey{Size: uint16(qr.Bucket(qr.DefaultSize)), Margin: qr.DefaultMargin}, true, ""},
		{"", "*/*", QRKey{Size: uint16(qr.Bucket(qr.DefaultSize)), Margin: qr.DefaultMargin}, true, ""},
		{"", "text/html", QRKey{}, true, ErrNotAcceptable.Error()},
		{"", "image/png;q=0, image/svg+xml;q=0", QRKey{}, true, ErrNotAcceptable.Error()},
		{"format=gif", "", QRKey{}, false, `format must be png or svg, got "gif"`},
		{"size=big", "", QRKey{}, false, `size must be a whole number, got "big"`},
		{"margin=1.5", "", QRKey{}, false, `margin must be a whole number, got "1.5"`},
		{"size=1", "", QRKey{}, false, "size"},
		{"a=%zz", "", QRKey{}, false, "the query string is malformed"},
	} {
		k, negotiated, err := QRParams(c.query, c.accept)
		switch {
		case c.err != "":
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("%q %q: %v, want an error with %q", c.query, c.accept, err, c.err)
			}
		case err != nil || k != c.want || negotiated != c.negotiated:
			t.Errorf("%q %q: %+v %v %v, want %+v %v", c.query, c.accept, k, negotiated, err, c.want, c.negotiated)
		}
	}
}

func TestQRHeaders(t *testing.T) {
	for _, c := range []struct {
		negotiated, byProto bool
		vary                string
	}{{false, false, ""}, {false, true, "X-Forwarded-Proto"}, {true, false, "Accept"}, {true, true, "Accept, X-Forwarded-Proto"}} {
		h := QRHeaders(c.negotiated, c.byProto)
		vary := ""
		for _, x := range h {
			if x.Name == "Vary" {
				vary = x.Value
			}
		}
		if vary != c.vary || h[0] != NoSniff || h[1].Name != "Content-Security-Policy" {
			t.Errorf("%v %v: %v", c.negotiated, c.byProto, h)
		}
	}
}
