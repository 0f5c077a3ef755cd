package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	. "github.com/onsi/gomega"

	"github.com/linkforge/linkforge/internal/devenv"
	"github.com/linkforge/linkforge/internal/testtiming"
)

// The shutdown of a redirector whose click events are held by their
// receiver, and whose redirect port has a client that never finishes its
// request, so that the drain takes all of --shutdown-timeout.
const (
	// shutdownTimeout is the redirector's --shutdown-timeout.
	shutdownTimeout = 4 * time.Second
	// shutdownClicks are the events buffered behind the receiver.
	shutdownClicks = 50
	// shutdownScrape is the last scrape's window after the events'
	// deadline: a tenth of the timeout (cmd/redirector's
	// lastScrapeWindow).
	shutdownScrape = shutdownTimeout / 10
	// shutdownSlack is how much later than --shutdown-timeout and the last
	// scrape's window after SIGTERM the process may exit: half the
	// timeout. The deadlines are timers; what the process does besides
	// waiting for them (stop the manager's caches, cancel the sink's
	// request, count the drops, write a log line) took 14 ms in all on
	// the development machine, so the slack is more than fifty times
	// that, far more than loadedMachine's four. A redirector that gave
	// the events a fresh timeout after the drain (the bug of issue 53)
	// exits after twice the timeout, past the bound.
	shutdownSlack = shutdownTimeout / 2
)

// heldSink is a CloudEvents receiver that never answers: each request
// waits until the sender gives up.
type heldSink struct {
	*httptest.Server
	mu       sync.Mutex
	requests int
}

func newHeldSink(t *testing.T) *heldSink {
	s := &heldSink{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		s.mu.Lock()
		s.requests++
		s.mu.Unlock()
		// Read to the end, so that the server sees the sender close
		// the connection (and ends the context).
		_, _ = io.Copy(io.Discard, req.Body)
		<-req.Context().Done()
	}))
	t.Cleanup(s.Close)
	return s
}

// scrape is one look at the redirector's /metrics during its shutdown.
type scrape struct {
	at      time.Time
	ok      bool
	dropped float64 // linkforge_events_dropped_total{reason="shutdown"}
}

// testClickEventsShutdown: on SIGTERM, with a client holding the redirect
// port's drain for all of --shutdown-timeout and 50 events held by their
// receiver, the events get what is left of the timeout and never more:
// the process exits after the events' deadline and the last scrape's
// window, and within them (plus shutdownSlack) of the signal; its final log line says how many
// events shutdown delivered and dropped, and /metrics answers throughout
// and shows the drops before the process exits.
func (e *env) testClickEventsShutdown(t *testing.T, bin, tmp, kubeconfig string) {
	g := newG(t)
	sink := newHeldSink(t)
	red := newReplica(g, "redirector-shutdown", bin, tmp, kubeconfig,
		"--events-cloudevents-url="+sink.URL, "--events-max-batch=10", "--events-buffer=1000", "--events-flush-interval=100ms",
		"--shutdown-timeout="+shutdownTimeout.String(), "--header-timeout=1m")
	p, err := devenv.Start(red.name, red.log, red.bin, red.args...)
	g.Expect(err).NotTo(HaveOccurred())
	t.Cleanup(func() {
		_ = p.Stop(20 * time.Second) // a failed test's: it has exited otherwise
		if t.Failed() {
			if b, err := os.ReadFile(p.Log); err == nil {
				t.Logf("--- %s log ---\n%s", p.Name, tail(string(b), 4000))
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	g.Expect(devenv.WaitHTTP(ctx, "http://"+red.probes+"/readyz", http.StatusOK)).To(Succeed())

	// Orphan clicks (no link holds these codes): each an event, all held.
	for i := range shutdownClicks {
		resp, err := noFollow.Get(fmt.Sprintf("http://%s/held-%d", red.addr, i))
		g.Expect(err).NotTo(HaveOccurred())
		_ = resp.Body.Close()
		g.Expect(resp.StatusCode).To(Equal(http.StatusNotFound))
	}
	g.Eventually(func() float64 {
		return metricWith(red.probes, "linkforge_events_buffer_depth", `sink="cloudevents"`)
	}).Should(Equal(float64(shutdownClicks)), "the events buffered, the first batch held by the receiver")
	g.Eventually(func() int { sink.mu.Lock(); defer sink.mu.Unlock(); return sink.requests }).Should(Equal(1))

	// A client that never finishes its request: the drain waits for it
	// until the timeout.
	held, err := net.Dial("tcp", red.addr)
	g.Expect(err).NotTo(HaveOccurred())
	defer func() { _ = held.Close() }()
	_, err = held.Write([]byte("GET /held HTTP/1.1\r\nHost: x\r\n"))
	g.Expect(err).NotTo(HaveOccurred())

	var scrapes []scrape
	scraped, stopScraping := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(scraped)
		client := &http.Client{Timeout: time.Second}
		for {
			select {
			case <-p.Done():
				return
			case <-stopScraping:
				return
			default:
			}
			s := scrape{at: time.Now()}
			if resp, err := client.Get("http://" + red.probes + "/metrics"); err == nil {
				body, err := io.ReadAll(resp.Body)
				_ = resp.Body.Close()
				s.ok = err == nil && resp.StatusCode == http.StatusOK
				s.dropped = sampleSum(string(body), "linkforge_events_dropped_total", `reason="shutdown"`)
			}
			scrapes = append(scrapes, s)
			time.Sleep(20 * time.Millisecond) // the scrapes' pace, not a wait for a condition
		}
	}()

	signalled := time.Now()
	g.Expect(p.Signal(syscall.SIGTERM)).To(Succeed())
	select {
	case <-p.Done():
	case <-time.After(4 * (shutdownTimeout + shutdownScrape + shutdownSlack)):
		// A backstop: the bound is asserted below.
	}
	close(stopScraping)
	exited := time.Since(signalled)
	<-scraped
	testtiming.Of(t).Logf("exited %s after SIGTERM (--shutdown-timeout %s); %d scrapes", exited.Round(time.Millisecond), shutdownTimeout, len(scrapes))
	g.Expect(p.Exited()).To(BeTrue(), "the redirector exits")
	// The events' delivery ran until its deadline, the end of the timeout,
	// and /metrics served the last scrape's window after it: lower bounds,
	// true at any speed.
	g.Expect(exited).To(BeNumerically(">=", shutdownTimeout+shutdownScrape), "the redirector exited before the events' deadline and the last scrape's window")
	g.Expect(exited).To(BeNumerically("<=", shutdownTimeout+shutdownScrape+shutdownSlack),
		"the redirector exited past --shutdown-timeout, the last scrape's window and the slack after SIGTERM")

	final := finalLogLine(t, p.Log)
	g.Expect(final).To(HaveKeyWithValue("clickEventsDroppedAtShutdown", HaveKeyWithValue("cloudevents", BeNumerically("==", shutdownClicks))))
	g.Expect(final).To(HaveKeyWithValue("clickEventsDeliveredAtShutdown", HaveKeyWithValue("cloudevents", BeNumerically("==", 0))))

	// /metrics answered from the signal until the drops were counted,
	// and showed them.
	last := -1
	for i, s := range scrapes {
		if s.ok {
			last = i
		}
	}
	g.Expect(last).To(BeNumerically(">=", 0), "no scrape of /metrics succeeded")
	for _, s := range scrapes[:last] {
		g.Expect(s.ok).To(BeTrue(), "a scrape %s after SIGTERM failed before the last one succeeded", s.at.Sub(signalled).Round(time.Millisecond))
	}
	g.Expect(scrapes[last].dropped).To(Equal(float64(shutdownClicks)),
		"the last scrape of /metrics (%s after SIGTERM) shows the events dropped at shutdown", scrapes[last].at.Sub(signalled).Round(time.Millisecond))
}

// finalLogLine is the redirector's last log line, "stopped", as JSON.
func finalLogLine(t testing.TB, path string) map[string]any {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var final map[string]any
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var line map[string]any
		if json.Unmarshal(sc.Bytes(), &line) == nil && line["msg"] == "stopped" {
			final = line
		}
	}
	if final == nil {
		t.Fatalf("%s has no final log line (\"stopped\")", path)
	}
	if b, err := json.Marshal(final); err == nil && !strings.Contains(string(b), "clickEvents") {
		t.Logf("final log line: %s", b)
	}
	return final
}
