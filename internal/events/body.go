package events

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// errBodyReleased is what a released requestBody reads.
var errBodyReleased = errors.New("the request's body was released: its answer came")

// requestBody is a request's body over a sink's buffer, which the sink
// reuses for its next batch. The HTTP transport may still be writing a
// request when its answer has come (the receiver answered early) and Do
// has returned: once released, the body reads nothing more, so the
// transport never sends the next batch's bytes (it closes that connection
// instead), and the buffer is the sink's again without a race.
type requestBody struct {
	mu       sync.Mutex
	rest     []byte
	released bool
}

func newRequestBody(b []byte) *requestBody { return &requestBody{rest: b} }

func (r *requestBody) Read(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.released {
		return 0, errBodyReleased
	}
	if len(r.rest) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.rest)
	r.rest = r.rest[n:]
	return n, nil
}

func (*requestBody) Close() error { return nil }

// release ends the body's reads: the buffer under it may be written.
func (r *requestBody) release() {
	r.mu.Lock()
	r.released, r.rest = true, nil
	r.mu.Unlock()
}

// requestBodies makes the bodies of one request over b: the first, and
// those the HTTP transport asks for to send the request again on a new
// connection (Request.GetBody); release releases them all.
type requestBodies struct {
	mu       sync.Mutex
	b        []byte
	made     []*requestBody
	released bool
}

// setOn gives req its body and GetBody.
func (r *requestBodies) setOn(req *http.Request) {
	body, _ := r.next()
	req.Body, req.GetBody, req.ContentLength = body, r.next, int64(len(r.b))
}

func (r *requestBodies) next() (io.ReadCloser, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	body := newRequestBody(r.b)
	if r.released {
		body.release()
	}
	r.made = append(r.made, body)
	return body, nil
}

func (r *requestBodies) release() {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.released = true
	for _, b := range r.made {
		b.release()
	}
}

// newHTTPClient is a sink's client: a copy of custom (tests), or else one
// of timeout over its own transport (newTransport). Redirects are not
// followed: a POST is not replayed elsewhere with the credentials or the
// signature of this URL.
func newHTTPClient(custom *http.Client, timeout time.Duration) *http.Client {
	var client *http.Client
	if custom != nil {
		cp := *custom
		client = &cp
	} else {
		client = &http.Client{Timeout: timeout, Transport: newTransport()}
	}
	client.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
	return client
}

// newTransport is http.DefaultTransport's settings over connections that
// copy a request's body through a buffer of their own (bodyConn).
func newTransport() *http.Transport {
	t := http.DefaultTransport.(*http.Transport).Clone()
	dial := (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
	t.DialContext = func(ctx context.Context, network, addr string) (net.Conn, error) {
		c, err := dial(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		return &bodyConn{Conn: c}, nil
	}
	return t
}

// bodyConn is a connection that copies what is written to it from a
// reader (the transport writes a request's body so) through one buffer
// it keeps: a net.TCPConn makes a buffer of 32 KiB for each request, the
// sink's garbage per batch that a collection would come for.
type bodyConn struct {
	net.Conn
	buf []byte
}

func (c *bodyConn) ReadFrom(r io.Reader) (int64, error) {
	if c.buf == nil {
		c.buf = make([]byte, 32<<10)
	}
	return io.CopyBuffer(struct{ io.Writer }{c.Conn}, r, c.buf)
}
