package redirect

import (
	"bufio"
	"encoding/json"
	"io"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/linkforge/linkforge/internal/events"
)

// defaultAccessLogBuffer is how many access-log records wait for the writer
// before new ones are dropped: about a second of a busy replica.
const defaultAccessLogBuffer = 4096

// accessRecord is an access-log line (docs/events.md#the-access-log): its
// remote is the client's network (events.ReduceClientAddress) unless
// Options.AccessLogKeepClientAddress; the URI is the request's, query and
// all, and the User-Agent whole.
type accessRecord struct {
	Time       string  `json:"time"`
	Remote     string  `json:"remote"`
	Method     string  `json:"method"`
	Host       string  `json:"host"`
	URI        string  `json:"uri"`
	Status     int     `json:"status"`
	Location   string  `json:"location,omitempty"`
	DurationMS float64 `json:"duration_ms"`
	UserAgent  string  `json:"user_agent,omitempty"`
}

// accessLog writes one JSON line per request from its own goroutine, so a
// slow or blocked output (a full pipe to a log shipper) never holds up a
// request: records beyond the buffer are dropped and counted.
type accessLog struct {
	// keepClient writes the client's address and port whole.
	keepClient bool
	queue      chan accessRecord
	dropped    prometheus.Counter
	stop       chan struct{}
	done       chan struct{}
	once       sync.Once
}

func newAccessLog(w io.Writer, buffer int, keepClient bool, dropped prometheus.Counter) *accessLog {
	if buffer <= 0 {
		buffer = defaultAccessLogBuffer
	}
	l := &accessLog{keepClient: keepClient, queue: make(chan accessRecord, buffer), dropped: dropped, stop: make(chan struct{}), done: make(chan struct{})}
	go l.run(w)
	return l
}

// record queues the access-log record of the request in ctx from client
// (Redirector.client: remote is the client address, as rules and events
// read it, not the socket's). It copies what it keeps: ctx's buffers are
// reused by the next request.
func (l *accessLog) record(ctx *fasthttp.RequestCtx, client netip.Addr, status int, loc string, start time.Time) {
	rec := accessRecord{
		Time:       start.UTC().Format(time.RFC3339Nano),
		Remote:     l.remote(ctx.RemoteAddr(), client),
		Method:     string(ctx.Method()),
		Host:       string(ctx.Request.Header.Host()),
		URI:        string(ctx.Request.Header.RequestURI()),
		Status:     status,
		Location:   loc,
		DurationMS: float64(time.Since(start).Microseconds()) / 1000,
		UserAgent:  string(ctx.Request.Header.UserAgent()),
	}
	select {
	case l.queue <- rec:
	default:
		l.dropped.Inc()
	}
}

func (l *accessLog) run(w io.Writer) {
	defer close(l.done)
	bw := bufio.NewWriter(w)
	enc := json.NewEncoder(bw)
	enc.SetEscapeHTML(false)
	write := func(rec accessRecord) {
		_ = enc.Encode(rec)
		// Flush once the queue is empty: one write per burst, not per line.
		if len(l.queue) == 0 {
			_ = bw.Flush()
		}
	}
	for {
		select {
		case rec := <-l.queue:
			write(rec)
		case <-l.stop:
			for {
				select {
				case rec := <-l.queue:
					write(rec)
				default:
					_ = bw.Flush()
					return
				}
			}
		}
	}
}

// close writes the queued records and stops the writer. Records of requests
// answered after it are dropped (and counted).
func (l *accessLog) close() {
	l.once.Do(func() { close(l.stop) })
	<-l.done
}

// loggedAddress is how the redirector's logs (the access log, the line of
// a refused request) write a client's address: its network
// (events.ReduceClientAddress, no port), or with keep the address and port
// whole. An address that is not an IP's (a test's pipe) is written as it
// is.
func loggedAddress(a net.Addr, keep bool) string {
	if a == nil {
		return ""
	}
	tcp, ok := a.(*net.TCPAddr)
	if keep || !ok {
		return a.String()
	}
	ip, _ := netip.AddrFromSlice(tcp.IP)
	return loggedClient(ip.Unmap(), false)
}

// remote is the access log's remote: the client's network, or with
// keepClient the whole client address, and its port when the client is the
// socket's peer (no proxy header named another).
func (l *accessLog) remote(socket net.Addr, client netip.Addr) string {
	if !l.keepClient {
		return loggedClient(client, false)
	}
	if tcp, ok := socket.(*net.TCPAddr); ok {
		if peer, ok := netip.AddrFromSlice(tcp.IP); ok && peer.Unmap() == client.Unmap() {
			return tcp.String()
		}
	}
	return loggedClient(client, true)
}

// loggedClient is the client address (Redirector.client) as the access log
// writes it: its network (events.ReduceClientAddress), or whole with keep.
func loggedClient(client netip.Addr, keep bool) string {
	if !keep {
		client = events.ReduceClientAddress(client)
	}
	if !client.IsValid() {
		return ""
	}
	return client.String()
}
