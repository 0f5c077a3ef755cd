package events

import (
	"bufio"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// TestReceiverAnswersHuge: a 2xx answer of 8 MiB is taken as delivered;
// the sink reads 64 KiB of it at most and goes on.
func TestReceiverAnswersHuge(t *testing.T) {
	var requests atomic.Int32
	huge := strings.Repeat("x", 8<<20)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		_, _ = w.Write([]byte(huge))
	}))
	t.Cleanup(srv.Close)
	p := start(t, testConfig(srv.URL))
	offer(t, p, 0, 30)
	waitFor(t, func() bool { return countsOf(p, SinkCloudEvents).sent == 30 }, "30 events sent")
	if c := countsOf(p, SinkCloudEvents); c.retries != 0 || int(requests.Load()) != 3 {
		t.Errorf("counts %+v, %d requests: want 3 requests, no retry", c, requests.Load())
	}
}

// TestReceiverSlowerThanTheTimeout: a receiver that answers after the
// request timeout is retried; when it answers in time, the events are
// delivered. The requests it went on with after the sink gave up on them
// arrive too: duplicates, with the same ids (at least once).
func TestReceiverSlowerThanTheTimeout(t *testing.T) {
	recv := newCEReceiver(t)
	recv.set(func(r *ceReceiver) { r.hold = make(chan struct{}) })
	cfg := testConfig(recv.URL)
	cfg.CloudEvents.Timeout = 5 * flush
	p := start(t, cfg)
	offer(t, p, 0, 10)
	waitFor(t, func() bool { return countsOf(p, SinkCloudEvents).retries >= 2 }, "two attempts timed out and were retried")
	recv.set(func(r *ceReceiver) { close(r.hold); r.hold = nil })
	waitFor(t, func() bool { return countsOf(p, SinkCloudEvents).sent == 10 }, "10 events sent")
	ids := map[string]string{}
	for _, e := range recv.accepted(allOK) {
		if code, ok := ids[e.ID()]; ok && code != string(e.Data()) {
			t.Errorf("id %s came with two events", e.ID())
		}
		ids[e.ID()] = string(e.Data())
	}
	if len(ids) != 10 {
		t.Errorf("received %d distinct ids, want 10", len(ids))
	}
	countsOf(p, SinkCloudEvents).conserved(t)
}

// TestReceiverSpeaksGarbage: a peer that answers with no HTTP at all is a
// failure that may pass (retried); serving goes on, the buffer holds, and
// Close counts what it could not deliver.
func TestReceiverSpeaksGarbage(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			conn, err := ln.Accept()
			if err != nil {
				return
			}
			go func() {
				defer func() { _ = conn.Close() }()
				_, _ = bufio.NewReader(conn).ReadString('\n')
				_, _ = conn.Write([]byte("SMTP ready, not HTTP\r\n\r\n"))
			}()
		}
	}()
	p := start(t, testConfig("http://"+ln.Addr().String()+"/"))
	offer(t, p, 0, 20)
	waitFor(t, func() bool { return countsOf(p, SinkCloudEvents).retries >= 3 }, "garbage answers retried")
	c := countsOf(p, SinkCloudEvents)
	if c.sent != 0 || c.failed != 0 || c.depth != 20 {
		t.Errorf("counts %+v: want 20 buffered", c)
	}
	ctx, cancel := contextWithTimeout(5 * flush)
	defer cancel()
	if err := p.Close(ctx); err == nil {
		t.Error("Close reported no loss")
	}
	c = countsOf(p, SinkCloudEvents)
	if c.shutdown != 20 {
		t.Errorf("counts %+v: want 20 dropped at shutdown", c)
	}
	c.conserved(t)
}

// TestOTLPReceiverLies: a 200 whose body is not an OTLP answer is a
// delivery (OTLP/HTTP: a 2xx says the request was processed), not
// retried, not counted as failed.
func TestOTLPReceiverLies(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/x-protobuf")
		_, _ = w.Write([]byte("\xff\xff\xff not protobuf"))
	}))
	t.Cleanup(srv.Close)
	p := start(t, otlpConfig(srv.URL))
	offer(t, p, 0, 5)
	waitFor(t, func() bool { return countsOf(p, SinkOTLP).sent == 5 }, "5 events delivered")
	if c := countsOf(p, SinkOTLP); c.retries != 0 || c.failed != 0 || c.rejected != 0 {
		t.Errorf("counts %+v: want 5 delivered, no retry, none failed", c)
	}
}
