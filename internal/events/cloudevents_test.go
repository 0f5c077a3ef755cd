package events

import (
	"context"
	"encoding/json"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	ceclient "github.com/cloudevents/sdk-go/v2/client"
	cloudevents "github.com/cloudevents/sdk-go/v2/event"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
	"github.com/google/uuid"
	. "github.com/onsi/gomega"
)

// checkEvent checks the documented attributes and data of event i.
func checkEvent(t *testing.T, e cloudevents.Event, i int) {
	t.Helper()
	if e.SpecVersion() != "1.0" || e.Type() != EventType || e.Source() != DefaultSource+"/redirector-0" ||
		e.Subject() != "team-a/link-"+itoa(i) || e.DataContentType() != cloudevents.ApplicationJSON {
		t.Errorf("event %d attributes: %s", i, e.String())
	}
	if u, err := uuid.Parse(e.ID()); err != nil || u.Version() != 8 {
		t.Errorf("event %d id %q is not a UUIDv8", i, e.ID())
	}
	if e.Time().IsZero() || time.Since(e.Time()) > time.Hour {
		t.Errorf("event %d time %v is not the offer's", i, e.Time())
	}
	var data map[string]any
	if err := json.Unmarshal(e.Data(), &data); err != nil {
		t.Fatalf("event %d data: %v", i, err)
	}
	want := map[string]any{
		"namespace": "team-a", "name": "link-" + itoa(i), "uid": "uid-" + itoa(i), "code": code(i), "orphan": false,
		"target": "https://example.com/docs", "rule": float64(-1), "variant": float64(-1), "status": float64(302), "refererHost": "news.example.org",
		"bot": false, "device": "mobile", "country": "DE", "clientAddress": "198.51.100.0",
	}
	for k, v := range want {
		if data[k] != v {
			t.Errorf("event %d data %s = %v, want %v", i, k, data[k], v)
		}
	}
	if len(data) != len(want) {
		t.Errorf("event %d data has %d fields, want %d: %v", i, len(data), len(want), data)
	}
}

func itoa(i int) string { return strconv.Itoa(i) }
func code(i int) string { r := record(i); return r.Code() }

// TestBatchesReachTheSDKReceiver: batched mode, decoded by the SDK's batch
// reader, signed and with the bearer token.
func TestBatchesReachTheSDKReceiver(t *testing.T) {
	recv := newCEReceiver(t)
	cfg := testConfig(recv.URL)
	key := []byte("0123456789abcdef0123456789abcdef")
	cfg.CloudEvents.SigningKey, cfg.CloudEvents.BearerToken = key, "t0ken"
	p := start(t, cfg)
	offer(t, p, 0, 25)
	waitFor(t, func() bool { return countsOf(p, SinkCloudEvents).sent == 25 }, "25 events sent")
	for i, e := range recv.accepted(allOK) {
		checkEvent(t, e, i)
	}
	for _, req := range recv.got() {
		if ct := req.header.Get("Content-Type"); ct != cloudevents.ApplicationCloudEventsBatchJSON {
			t.Errorf("content type %q", ct)
		}
		if err := Verify(key, req.header, req.body, time.Now(), time.Minute); err != nil {
			t.Errorf("signature: %v", err)
		}
		if req.header.Get(HeaderWebhookID) != req.events[0].ID() {
			t.Errorf("webhook-id %q is not the first event's id %q", req.header.Get(HeaderWebhookID), req.events[0].ID())
		}
		if err := Verify([]byte("another key of 32 bytes, or so.."), req.header, req.body, time.Now(), time.Minute); err == nil {
			t.Error("a signature checks with another key")
		}
		if got := req.header.Get("Authorization"); got != "Bearer t0ken" {
			t.Errorf("Authorization %q", got)
		}
	}
	c := countsOf(p, SinkCloudEvents)
	if c.sent != 25 || c.retries != 0 {
		t.Errorf("counts %+v: want 25 sent, no retry", c)
	}
	c.conserved(t)
}

// TestSingleEventsReachStartReceiver: single mode, received by the SDK
// client's own receiver on loopback.
func TestSingleEventsReachStartReceiver(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	client, err := ceclient.NewHTTP(cehttp.WithListener(ln))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var mu sync.Mutex
	var got []cloudevents.Event
	received := make(chan struct{})
	go func() {
		defer close(received)
		_ = client.StartReceiver(ctx, func(e cloudevents.Event) {
			mu.Lock()
			got = append(got, e)
			mu.Unlock()
		})
	}()
	t.Cleanup(func() { cancel(); <-received })

	cfg := testConfig("http://" + ln.Addr().String() + "/")
	cfg.CloudEvents.Single = true
	p := start(t, cfg)
	offer(t, p, 0, 12)
	waitFor(t, func() bool { mu.Lock(); defer mu.Unlock(); return len(got) == 12 }, "12 events received")
	mu.Lock()
	defer mu.Unlock()
	seen := map[string]int{}
	for _, e := range got {
		var d Event
		if err := json.Unmarshal(e.Data(), &d); err != nil {
			t.Fatal(err)
		}
		i := 0
		for ; i < 12 && code(i) != d.Code; i++ {
		}
		checkEvent(t, e, i)
		seen[d.Code]++
	}
	if len(seen) != 12 {
		t.Errorf("received %v: want each of 12 codes once", seen)
	}
}

// TestSinkDownOrSlowKeepsTheBound: while the receiver is down (connections
// cut) or slow (answers held), the buffer fills to Buffer events and the
// rest are dropped and counted; once back, the receiver gets the oldest
// Buffer events, each once.
func TestSinkDownOrSlowKeepsTheBound(t *testing.T) {
	for _, tc := range []struct {
		name         string
		fail, revive func(r *ceReceiver)
	}{
		{"down", func(r *ceReceiver) { r.down = true }, func(r *ceReceiver) { r.down = false }},
		{"slow", func(r *ceReceiver) { r.hold = make(chan struct{}) }, func(r *ceReceiver) { close(r.hold); r.hold = nil }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recv := newCEReceiver(t)
			recv.set(tc.fail)
			p := start(t, testConfig(recv.URL))
			offer(t, p, 0, 350)
			waitFor(t, func() bool { return countsOf(p, SinkCloudEvents).bufferFull == 250 }, "250 of 350 events dropped: buffer_full")
			c := countsOf(p, SinkCloudEvents)
			if c.depth != 100 || c.sent != 0 || c.handoffFull != 0 {
				t.Errorf("while the sink is %s: %+v: want 100 buffered", tc.name, c)
			}
			c.conserved(t)

			recv.set(tc.revive)
			waitFor(t, func() bool { return countsOf(p, SinkCloudEvents).sent == 100 }, "the 100 buffered events sent")
			evs := recv.accepted(allOK)
			if len(evs) != 100 {
				t.Fatalf("received %d events, want the 100 buffered", len(evs))
			}
			for i, e := range evs {
				var d Event
				_ = json.Unmarshal(e.Data(), &d)
				if d.Code != code(i) {
					t.Fatalf("event %d has code %s, want %s: the oldest are kept, in order", i, d.Code, code(i))
				}
			}
			c = countsOf(p, SinkCloudEvents)
			if c.depth != 0 {
				t.Errorf("%d events still buffered", c.depth)
			}
			c.conserved(t)
			if tc.name == "down" && c.retries == 0 {
				t.Error("no retry counted while the receiver was down")
			}
		})
	}
}

// TestOfferNeverBlocks: with the receiver holding every request, many
// offers from several goroutines all return; what does not fit is counted.
func TestOfferNeverBlocks(t *testing.T) {
	recv := newCEReceiver(t)
	recv.set(func(r *ceReceiver) { r.hold = make(chan struct{}) })
	p := start(t, testConfig(recv.URL))
	const goroutines, each = 4, 25000
	var wg sync.WaitGroup
	for range goroutines {
		wg.Add(1)
		go func() {
			defer wg.Done()
			r := record(1)
			for range each {
				p.Offer(&r)
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(eventually):
		t.Fatalf("%d offers did not return within %s while the receiver held its requests", goroutines*each, eventually)
	}
	waitFor(t, func() bool { return p.ring.depth() == 0 }, "the batcher empties the ring")
	c := countsOf(p, SinkCloudEvents)
	// How many the batcher took during the flood depends on the scheduler;
	// the buffer's bound does not.
	if c.offered != goroutines*each || c.depth < 1 || c.depth > 100 || c.handoffFull+c.bufferFull != goroutines*each-c.depth {
		t.Errorf("counts %+v: want all offered, 1 to 100 buffered, the rest dropped", c)
	}
	c.conserved(t)
}

// TestRetriesWithTheSameEvents: 5xx and 429 are retried with the same body
// and ids (the idempotency key) until accepted; Retry-After is honoured.
func TestRetriesWithTheSameEvents(t *testing.T) {
	for _, tc := range []struct {
		name     string
		statuses []int
		header   func() http.Header
		minGap   time.Duration // between the failed answer and the retry
	}{
		{"5xx", []int{500, 502, 503, 504}, nil, 0},
		{"429 Retry-After seconds", []int{429}, func() http.Header { return http.Header{"Retry-After": {"1"}} }, time.Second},
		{"503 Retry-After date", []int{503}, func() http.Header {
			// at least 2s from now: the date has whole seconds
			return http.Header{"Retry-After": {time.Now().Add(3 * time.Second).UTC().Format(http.TimeFormat)}}
		}, 2 * time.Second},
		{"408", []int{408}, nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			recv := newCEReceiver(t)
			statusOf := func(n int) int {
				if n < len(tc.statuses) {
					return tc.statuses[n]
				}
				return http.StatusOK
			}
			recv.respond = func(n int) (int, http.Header) {
				if tc.header == nil {
					return statusOf(n), nil
				}
				return statusOf(n), tc.header()
			}
			cfg := testConfig(recv.URL)
			cfg.CloudEvents.SigningKey = []byte("0123456789abcdef")
			p := start(t, cfg)
			offer(t, p, 0, 5)
			waitFor(t, func() bool { return countsOf(p, SinkCloudEvents).sent == 5 }, "5 events sent")
			reqs := recv.got()
			if len(reqs) != len(tc.statuses)+1 {
				t.Fatalf("%d requests, want %d", len(reqs), len(tc.statuses)+1)
			}
			for _, r := range reqs[1:] {
				if string(r.body) != string(reqs[0].body) || r.header.Get(HeaderWebhookID) != reqs[0].header.Get(HeaderWebhookID) {
					t.Error("a retry sent another body or webhook-id")
				}
			}
			if tc.minGap > 0 {
				if gap := reqs[1].at.Sub(reqs[0].at); gap < tc.minGap {
					t.Errorf("retried after %s: Retry-After asked for %s at least", gap, tc.minGap)
				}
			}
			c := countsOf(p, SinkCloudEvents)
			if c.retries != len(tc.statuses) || c.failed != 0 {
				t.Errorf("counts %+v: want %d retries", c, len(tc.statuses))
			}
			c.conserved(t)
		})
	}
}

// TestRefusedIsFailed: a status that is not retried (4xx, a redirect)
// fails the batch at once: counted, never sent again.
func TestRefusedIsFailed(t *testing.T) {
	for _, status := range []int{400, 401, 404, 413, 307} {
		t.Run(http.StatusText(status), func(t *testing.T) {
			recv := newCEReceiver(t)
			recv.respond = func(int) (int, http.Header) { return status, http.Header{"Location": {"http://127.0.0.1:1/"}} }
			p := start(t, testConfig(recv.URL))
			offer(t, p, 0, 10)
			waitFor(t, func() bool { return countsOf(p, SinkCloudEvents).failed == 10 }, "10 events failed")
			// No retry comes: 20 flush intervals, 5 of the longest backoff.
			NewWithT(t).Consistently(func() int { return len(recv.got()) }).WithTimeout(20 * flush).Should(Equal(1))
			c := countsOf(p, SinkCloudEvents)
			if c.retries != 0 || c.sent != 0 {
				t.Errorf("counts %+v: want 10 failed, no retry", c)
			}
			c.conserved(t)
		})
	}
}

// TestCloseDeliversThenDrops: Close delivers what is buffered; with the
// receiver down it gives up at its deadline and counts the rest.
func TestCloseDeliversThenDrops(t *testing.T) {
	recv := newCEReceiver(t)
	p := start(t, testConfig(recv.URL))
	for i := range 25 { // no wait: Close takes what the ring holds
		r := record(i)
		p.Offer(&r)
	}
	ctx, cancel := contextWithTimeout(eventually)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if n := len(recv.accepted(allOK)); n != 25 {
		t.Errorf("Close delivered %d events, want 25", n)
	}

	recv.set(func(r *ceReceiver) { r.down = true })
	p = start(t, testConfig(recv.URL))
	offer(t, p, 0, 30)
	ctx, cancel = contextWithTimeout(5 * flush)
	defer cancel()
	if err := p.Close(ctx); err == nil {
		t.Error("Close reported no loss with the receiver down")
	}
	r := record(99)
	if p.Offer(&r) {
		t.Error("Offer took a record after Close")
	}
	c := countsOf(p, SinkCloudEvents)
	if c.shutdown != 31 || c.depth != 0 {
		t.Errorf("counts %+v: want the 30 buffered and 1 late offer dropped as shutdown", c)
	}
	c.conserved(t)
}

func TestConfigErrors(t *testing.T) {
	for _, tc := range []struct {
		cfg  Config
		want string
	}{
		{Config{}, "no sink"},
		{Config{CloudEvents: CloudEventsConfig{URL: "ftp://x"}}, "want an http or https URL"},
		{Config{CloudEvents: CloudEventsConfig{URL: "http://"}}, "has no host"},
		{Config{OTLP: OTLPConfig{Endpoint: "https://u:p@collector:4318"}}, "user or password"},
		{Config{OTLP: OTLPConfig{Endpoint: "http://c:4318"}, Buffer: 10, MaxBatch: 20}, "larger than the buffer"},
		{Config{CloudEvents: CloudEventsConfig{URL: "http://%zz"}}, "not a URL"},
	} {
		_, err := New(tc.cfg)
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%+v) = %v, want an error saying %q", tc.cfg, err, tc.want)
		}
	}
}

func TestParseRetryAfter(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		v    string
		want time.Duration
	}{
		{"", 0}, {"0", 0}, {"-5", 0}, {"7", 7 * time.Second}, {"soon", 0}, {"1.5", 0},
		{"99999999999", 24 * time.Hour},
		{now.Add(90 * time.Second).Format(http.TimeFormat), 90 * time.Second},
		{now.Add(-time.Minute).Format(http.TimeFormat), 0},
	} {
		if got := parseRetryAfter(tc.v, now); got != tc.want {
			t.Errorf("parseRetryAfter(%q) = %s, want %s", tc.v, got, tc.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	c := RetryConfig{InitialBackoff: 100 * time.Millisecond, MaxBackoff: time.Second, MaxRetryAfter: time.Minute}
	for retry, ceiling := range []time.Duration{100, 200, 400, 800, 1000, 1000} {
		ceiling *= time.Millisecond
		for range 100 {
			if d := backoff(&c, retry, 0); d < ceiling/2 || d > ceiling {
				t.Fatalf("retry %d waits %s: want within [%s, %s]", retry, d, ceiling/2, ceiling)
			}
		}
	}
	if d := backoff(&c, 1000, 0); d > time.Second {
		t.Errorf("retry 1000 waits %s: more than MaxBackoff", d)
	}
	if d := backoff(&c, 0, 10*time.Second); d < 10*time.Second || d >= 10*time.Second+c.InitialBackoff {
		t.Errorf("Retry-After 10s waits %s", d)
	}
	if d := backoff(&c, 0, time.Hour); d > time.Minute+c.InitialBackoff {
		t.Errorf("Retry-After 1h waits %s: more than MaxRetryAfter", d)
	}
}

func TestSignVerify(t *testing.T) {
	key, err := ParseSigningKey("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw")
	if err != nil {
		t.Fatal(err)
	}
	// The Standard Webhooks scheme's published example.
	h := http.Header{}
	h.Set(HeaderWebhookID, "msg_p5jXN8AQM9LWM0D4loKWxJek")
	h.Set(HeaderWebhookTimestamp, "1614265330")
	h.Set(HeaderWebhookSignature, "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=")
	body := []byte(`{"test": 2432232314}`)
	if err := Verify(key, h, body, time.Unix(1614265330, 0), time.Minute); err != nil {
		t.Errorf("the scheme's example does not verify: %v", err)
	}
	if err := Verify(key, h, []byte(`{"test": 2432232315}`), time.Unix(1614265330, 0), time.Minute); err == nil {
		t.Error("a changed body verifies")
	}
	if err := Verify(key, h, body, time.Unix(1614265330+3600, 0), time.Minute); err == nil {
		t.Error("an hour-old signature verifies")
	}
	for _, bad := range []string{"whsec_!!!", "short"} {
		if _, err := ParseSigningKey(bad); err == nil {
			t.Errorf("ParseSigningKey(%q) took it", bad)
		}
	}
}
