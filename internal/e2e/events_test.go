package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	. "github.com/onsi/gomega"

	"github.com/linkforge/linkforge/internal/devenv"
	"github.com/linkforge/linkforge/internal/events"
	"github.com/linkforge/linkforge/internal/events/eventstest"
	"github.com/linkforge/linkforge/internal/testtiming"
)

// The click events' redirector of the e2e: a replica beside the main one
// (its /metrics also serve testMonitoringMetrics: the dashboard's
// linkforge_events_* series exist only where events are on), pushing
// CloudEvents batches to clickSink. Its buffer is small so that an outage
// of clickOutage under load exercises the bound of docs/events.md.
const (
	clickBuffer   = 2000
	clickMaxBatch = 100
	clickFlush    = 100 * time.Millisecond
	// clickOutage is how long the sink is down under load (the 30s): at the
	// thousands of redirects a second of this test, many times the
	// buffer.
	clickOutage = 30 * time.Second
	// clickBaseline is how long the load runs with the sink up first.
	clickBaseline = 5 * time.Second
	// clickWorkers is how many keep-alive clients send the load.
	clickWorkers = 4
)

// clickSink is a CloudEvents receiver that reads each request with the
// CloudEvents SDK's own HTTP reader (batches and single events), keeps each
// event once by id, and can be taken down: its connections are then cut
// without an answer, as a crashed receiver's would be.
type clickSink struct {
	*httptest.Server
	mu     sync.Mutex
	down   bool
	phase  int // set by the test: which part of it an event first arrived in
	byID   map[string]cloudevents.Event
	firstP map[string]int // id -> phase of its first arrival
	dups   int
}

func newClickSink(t testing.TB) *clickSink {
	s := &clickSink{byID: map[string]cloudevents.Event{}, firstP: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *clickSink) serve(w http.ResponseWriter, req *http.Request) {
	s.mu.Lock()
	down := s.down
	s.mu.Unlock()
	if down {
		if conn, _, err := w.(http.Hijacker).Hijack(); err == nil {
			_ = conn.Close()
		}
		return
	}
	_, evs, err := eventstest.ReadCloudEvents(req)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	for _, e := range evs {
		if _, seen := s.byID[e.ID()]; seen {
			s.dups++
			continue
		}
		s.byID[e.ID()] = e
		s.firstP[e.ID()] = s.phase
	}
	s.mu.Unlock()
	w.WriteHeader(http.StatusOK)
}

func (s *clickSink) set(f func(s *clickSink)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	f(s)
}

// received returns the events received, and how many first arrived in phase.
func (s *clickSink) received(phase int) (all []cloudevents.Event, inPhase int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for id, e := range s.byID {
		all = append(all, e)
		if s.firstP[id] == phase {
			inPhase++
		}
	}
	return all, inPhase
}

// clickEnv is the events' redirector and its sink.
type clickEnv struct {
	*env
	sink    *clickSink
	red     *replica
	clicked int // GETs the test made that are clicks (each answered)
}

// startClickEvents starts a redirector with click events on, as the
// redirector's service account, beside the main one; it is stopped (and
// must exit 0) when t ends.
func (e *env) startClickEvents(t *testing.T, bin, tmp, kubeconfig string) *clickEnv {
	g := newG(t)
	c := &clickEnv{env: e, sink: newClickSink(t)}
	c.red = newReplica(g, "redirector-events", bin, tmp, kubeconfig, clickEventFlags(c.sink.URL)...)
	p, err := devenv.Start(c.red.name, c.red.log, c.red.bin, c.red.args...)
	g.Expect(err).NotTo(HaveOccurred())
	c.red.proc = p
	t.Cleanup(func() {
		if err := p.Stop(20 * time.Second); err != nil {
			t.Error(err)
		}
		expectNoForbidden(t, p)
		if t.Failed() {
			if b, err := os.ReadFile(p.Log); err == nil {
				t.Logf("--- %s log ---\n%s", p.Name, tail(string(b), 4000))
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	g.Expect(devenv.WaitHTTP(ctx, "http://"+c.red.probes+"/readyz", http.StatusOK)).To(Succeed())
	return c
}

// clickEventFlags are the events' redirector's flags for a sink at sinkURL.
func clickEventFlags(sinkURL string) []string {
	return []string{"--events-cloudevents-url=" + sinkURL + "/events",
		fmt.Sprint("--events-buffer=", clickBuffer), fmt.Sprint("--events-max-batch=", clickMaxBatch),
		"--events-flush-interval=" + clickFlush.String(), "--country-header=CF-IPCountry", "--shutdown-timeout=10s"}
}

// click sends method path to the events' redirector with a phone's
// User-Agent, a Referer and a country, and returns the status.
func (c *clickEnv) click(client *http.Client, method, path string) (int, error) {
	req, err := http.NewRequest(method, "http://"+c.red.addr+path, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("User-Agent", "Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X) AppleWebKit/605.1.15 Mobile/15E148")
	req.Header.Set("Referer", "https://News.Example.org/item?id=1")
	req.Header.Set("CF-IPCountry", "de")
	resp, err := client.Do(req)
	if err != nil {
		return 0, err
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	_ = resp.Body.Close()
	return resp.StatusCode, nil
}

// testClickFields: a redirect and an unknown code through the real
// binary arrive at the receiver with the fields of docs/events.md; HEAD and
// the preview are not clicks.
func (c *clickEnv) testClickFields(t *testing.T) {
	g, e := newG(t), c.in(t)
	code := e.mustKubectl("get", "shortlink", "docs", "-n", "default", "-o", "jsonpath={.status.code}")
	uid := e.mustKubectl("get", "shortlink", "docs", "-n", "default", "-o", "jsonpath={.metadata.uid}")
	url := e.mustKubectl("get", "shortlink", "docs", "-n", "default", "-o", "jsonpath={.spec.url}")
	// Ready means synced: the first answer is the link's.
	clickedAt := time.Now()
	g.Expect(c.click(noFollow, "GET", "/default/"+code+"?utm_source=secret")).To(Equal(http.StatusFound))
	c.clicked++
	for _, m := range []struct{ method, path string }{{"HEAD", "/default/" + code}, {"GET", "/default/" + code + "+"}} {
		_, err := c.click(noFollow, m.method, m.path)
		g.Expect(err).NotTo(HaveOccurred())
	}
	g.Expect(c.click(noFollow, "GET", "/default/no-such-code")).To(Equal(http.StatusNotFound))
	c.clicked++

	var got []cloudevents.Event
	g.Eventually(func() int { got, _ = c.sink.received(0); return len(got) }).Should(Equal(2))
	g.Consistently(func() float64 { return metric(c.red.probes, "linkforge_events_offered_total") }, 2*clickFlush+time.Second).
		Should(Equal(2.0), "two clicks: HEAD and the preview are not")
	slices.SortFunc(got, func(a, b cloudevents.Event) int { return a.Time().Compare(b.Time()) })
	for _, ev := range got {
		g.Expect(ev.SpecVersion()).To(Equal("1.0"))
		g.Expect(ev.Type()).To(Equal(events.EventType))
		g.Expect(ev.Source()).To(HavePrefix("/linkforge/redirector"))
		g.Expect(ev.DataContentType()).To(Equal("application/json"))
		// The click's time, on this machine's clock: between the first
		// click and the event's arrival, however long they took.
		g.Expect(ev.Time()).To(BeTemporally(">=", clickedAt.Truncate(time.Second)))
		g.Expect(ev.Time()).To(BeTemporally("<=", time.Now()))
	}
	data := func(ev cloudevents.Event) events.Event {
		var d events.Event
		g.Expect(json.Unmarshal(ev.Data(), &d)).To(Succeed())
		return d
	}
	g.Expect(got[0].Subject()).To(Equal("default/docs"))
	g.Expect(data(got[0])).To(Equal(events.Event{
		Namespace: "default", Name: "docs", UID: uid, Code: code, Target: url, Rule: events.NoRule, Variant: events.NoVariant, Status: 302,
		RefererHost: "news.example.org", Device: events.DeviceMobile, Country: "DE", ClientAddress: "127.0.0.0",
	}))
	g.Expect(got[1].Subject()).To(Equal("default/no-such-code"), "an orphan's code is its path")
	g.Expect(data(got[1])).To(Equal(events.Event{
		Code: "default/no-such-code", Orphan: true, Rule: events.NoRule, Variant: events.NoVariant, Status: 404,
		RefererHost: "news.example.org", Device: events.DeviceMobile, Country: "DE", ClientAddress: "127.0.0.0",
	}))
}

// load sends GETs of path from clickWorkers keep-alive clients for d, and on
// until atLeast have been answered (a slow machine answers fewer in d), and
// returns the latency of each answer, sorted; every request must be
// answered with a redirect. It stops at ten times d whatever the count: a
// backstop far past any machine's pace, after which the caller's count
// check fails.
func (c *clickEnv) load(g Gomega, path string, d time.Duration, atLeast int) []time.Duration {
	client := &http.Client{
		Transport:     &http.Transport{MaxIdleConnsPerHost: clickWorkers, DisableCompression: true},
		CheckRedirect: noFollow.CheckRedirect,
		Timeout:       10 * time.Second,
	}
	defer client.CloseIdleConnections()
	var mu sync.Mutex
	var lat []time.Duration
	var bad []string
	var answered atomic.Int64
	began := time.Now()
	end, giveUp := began.Add(d), began.Add(10*d)
	more := func() bool {
		now := time.Now()
		return now.Before(end) || answered.Load() < int64(atLeast) && now.Before(giveUp)
	}
	var wg sync.WaitGroup
	for range clickWorkers {
		wg.Go(func() {
			var mine []time.Duration
			for more() {
				start := time.Now()
				status, err := c.click(client, "GET", path)
				if err != nil || status != http.StatusFound {
					mu.Lock()
					bad = append(bad, fmt.Sprint(status, err))
					mu.Unlock()
					return
				}
				mine = append(mine, time.Since(start))
				answered.Add(1)
			}
			mu.Lock()
			lat = append(lat, mine...)
			mu.Unlock()
		})
	}
	wg.Wait()
	g.Expect(bad).To(BeEmpty(), "requests not answered with a redirect")
	c.clicked += len(lat)
	slices.Sort(lat)
	return lat
}

// testClickOutage: with the receiver down for clickOutage under load (and
// on until the outage's clicks are twice the buffer), every click is
// redirected, the events kept are at most the buffer (and at least the
// buffer less two batches: the batch being sent and the one the batcher
// holds), and what was lost is exactly what linkforge_events_dropped_total
// counts (docs/events.md, Delivery guarantee). How much the outage slows
// serving (the goal: not at all) is measured by BenchmarkClickOutage.
func (c *clickEnv) testClickOutage(t *testing.T) {
	g, e := newG(t), c.in(t)
	code := e.mustKubectl("get", "shortlink", "docs", "-n", "default", "-o", "jsonpath={.status.code}")
	path := "/default/" + code

	c.sink.set(func(s *clickSink) { s.phase = 1 })
	before := c.load(g, path, clickBaseline, 0)
	c.sink.set(func(s *clickSink) { s.phase, s.down = 2, true })
	downAt := time.Now()
	during := c.load(g, path, clickOutage, 2*clickBuffer+1)
	tookDown := time.Since(downAt)
	c.sink.set(func(s *clickSink) { s.phase, s.down = 3, false })

	testtiming.Of(t).Logf("redirects: %d in %s with the sink up (p50 %s, p99 %s), %d in %s with it down (p50 %s, p99 %s)",
		len(before), clickBaseline, quantile(before, 0.5), quantile(before, 0.99),
		len(during), tookDown.Round(time.Millisecond), quantile(during, 0.5), quantile(during, 0.99))
	g.Expect(len(during)).To(BeNumerically(">", 2*clickBuffer), "the outage's clicks must exceed the buffer to exercise the bound")

	// Once the receiver is back, the buffers empty: every event is sent
	// or was dropped, and the counts add up.
	depth := func() float64 {
		return metric(c.red.probes, "linkforge_events_buffer_depth") + metric(c.red.probes, "linkforge_events_handoff_depth")
	}
	g.Eventually(depth, 2*time.Minute).Should(BeZero())
	offered := metric(c.red.probes, "linkforge_events_offered_total")
	sent := metric(c.red.probes, "linkforge_events_sent_total")
	failed := metric(c.red.probes, "linkforge_events_failed_total")
	dropped := metric(c.red.probes, "linkforge_events_dropped_total")
	full := metricWith(c.red.probes, "linkforge_events_dropped_total", `reason="buffer_full"`)
	got, kept := c.sink.received(3)
	t.Logf("clicks %d, offered %v, received %d (%d after the outage), sent %v, dropped %v (buffer_full %v), failed %v, duplicates %d",
		c.clicked, offered, len(got), kept, sent, dropped, full, failed, c.sink.dups)
	g.Expect(offered).To(Equal(float64(c.clicked)), "one event per click")
	g.Expect(failed).To(BeZero())
	g.Expect(sent).To(Equal(float64(len(got))), "sent_total counts the events received (each once)")
	g.Expect(float64(c.clicked-len(got))).To(Equal(dropped), "what was lost is what dropped_total shows")
	g.Expect(full).To(BeNumerically(">", 0), "the buffer filled")
	g.Expect(kept).To(And(BeNumerically("<=", clickBuffer), BeNumerically(">=", clickBuffer-2*clickMaxBatch)),
		"the outage's events kept: the buffer (less the batches in flight)")
}

// metricWith is the sum of name's samples whose labels contain label.
func metricWith(addr, name, label string) float64 {
	body, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return 0
	}
	defer func() { _ = body.Body.Close() }()
	b, _ := io.ReadAll(body.Body)
	return sampleSum(string(b), name, label)
}

// sampleSum is the sum of name's samples in a scrape whose labels contain
// label.
func sampleSum(scrape, name, label string) float64 {
	sum := 0.0
	for _, line := range strings.Split(scrape, "\n") {
		if strings.HasPrefix(line, name+"{") && strings.Contains(line, label) {
			var v float64
			if _, err := fmt.Sscan(line[strings.LastIndexByte(line, ' ')+1:], &v); err == nil {
				sum += v
			}
		}
	}
	return sum
}
