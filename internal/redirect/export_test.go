package redirect

import (
	"context"
	"io"
	"net"
	"net/http"
	"sync"

	"github.com/valyala/fasthttp/fasthttputil"
)

// memClients holds, per Redirector, a client of a redirect Server that
// serves it on an in-memory listener (started on first use, never stopped).
var memClients sync.Map // *Redirector -> *http.Client

func memClient(r *Redirector) *http.Client {
	if c, ok := memClients.Load(r); ok {
		return c.(*http.Client)
	}
	ln := fasthttputil.NewInmemoryListener()
	s := NewServer("in-memory", r, DefaultServerOptions())
	s.ln = ln
	go func() { _ = s.Start(context.Background()) }()
	c := &http.Client{
		Transport: &http.Transport{
			DialContext:        func(context.Context, string, string) (net.Conn, error) { return ln.Dial() },
			DisableCompression: true,
		},
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	actual, _ := memClients.LoadOrStore(r, c)
	return actual.(*http.Client)
}

// ServeHTTP answers req through the redirect server over an in-memory
// connection, so that tests written with httptest (here and in the envtest
// suite) drive the fasthttp front end, not a copy of it.
func (r *Redirector) ServeHTTP(w http.ResponseWriter, req *http.Request) {
	out := req.Clone(req.Context())
	out.RequestURI = ""
	out.URL.Scheme, out.URL.Host = "http", "redirector"
	resp, err := memClient(r).Do(out)
	if err != nil {
		http.Error(w, err.Error(), http.StatusTeapot)
		return
	}
	defer func() { _ = resp.Body.Close() }()
	for k, v := range resp.Header {
		w.Header()[k] = v
	}
	w.WriteHeader(resp.StatusCode)
	_, _ = io.Copy(w, resp.Body)
}

// Decided sets what the controller writes for a decision with the given
// Ready reason (see decided), for the envtest suite.
var Decided = decided
