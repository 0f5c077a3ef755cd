package devenv

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// maxEventsBody bounds one request to the local receiver: the redirector's
// batches are far smaller (--events-max-batch events of a few hundred bytes).
const maxEventsBody = 4 << 20

// EventPrinter is a local CloudEvents receiver for `make dev EVENTS=1`: it
// takes what the redirector's CloudEvents sink sends (a batch,
// application/cloudevents-batch+json, or one structured event) and writes
// each event as one line of JSON to Out.
type EventPrinter struct {
	// URL is where the redirector sends (--events-cloudevents-url).
	URL string

	srv *http.Server
	ln  net.Listener
	mu  sync.Mutex
	out io.Writer
}

// StartEventPrinter listens on a free loopback port and writes every event
// it receives to out, one line each.
func StartEventPrinter(out io.Writer) (*EventPrinter, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("click events receiver: %w", err)
	}
	p := &EventPrinter{URL: "http://" + ln.Addr().String() + "/", ln: ln, out: out}
	p.srv = &http.Server{Handler: p, ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = p.srv.Serve(ln) }()
	return p, nil
}

// Close stops the receiver.
func (p *EventPrinter) Close() error {
	if err := p.srv.Close(); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// ServeHTTP answers the sink: 200 for what it printed, 400 for a body that
// is no event (printed as a warning line, so a bad sink shows too).
func (p *EventPrinter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost {
		w.Header().Set("Allow", http.MethodPost)
		http.Error(w, "POST click events here", http.StatusMethodNotAllowed)
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, maxEventsBody))
	if err != nil {
		http.Error(w, err.Error(), http.StatusRequestEntityTooLarge)
		return
	}
	lines, err := EventLines(body)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		_, _ = fmt.Fprintf(p.out, "events: not a CloudEvent or a batch of them (%s): %v\n", r.Header.Get("Content-Type"), err)
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	for _, l := range lines {
		_, _ = fmt.Fprintf(p.out, "event: %s\n", l)
	}
}

// EventLines splits a CloudEvents body, a batch (a JSON array) or one
// structured event (a JSON object), into one compact JSON line per event.
func EventLines(body []byte) ([]string, error) {
	body = bytes.TrimSpace(body)
	var events []json.RawMessage
	switch {
	case len(body) > 0 && body[0] == '[':
		if err := json.Unmarshal(body, &events); err != nil {
			return nil, err
		}
	case len(body) > 0 && body[0] == '{':
		events = []json.RawMessage{body}
	default:
		return nil, errors.New("want a JSON object or array")
	}
	lines := make([]string, 0, len(events))
	for _, e := range events {
		var b bytes.Buffer
		if err := json.Compact(&b, e); err != nil {
			return nil, err
		}
		if b.Len() == 0 || b.Bytes()[0] != '{' {
			return nil, fmt.Errorf("an event is a JSON object, not %.20s", b.String())
		}
		lines = append(lines, b.String())
	}
	return lines, nil
}
