// Command benchfloor is the floor of hack/bench-redirect.sh: the redirector's
// net/http server settings (redirect.NewHTTPServer) with a handler that
// answers every request with one fixed 302 and the same headers and body as
// the redirector, without routing, index, expiry checks or metrics. The
// redirector's requests/s relative to it shows what the redirector adds; its
// requests/s relative to nginx shows what net/http costs.
package main

import (
	"flag"
	"log"
	"net/http"

	"github.com/linkforge/linkforge/internal/redirect"
)

func main() {
	addr := flag.String("bind-address", "127.0.0.1:18070", "listen address")
	location := flag.String("location", "https://www.example.com/articles/2026/0/a-typical-article-slug?utm_source=linkforge", "Location of every answer")
	flag.Parse()
	var (
		loc  = []string{*location}
		cc   = []string{"private, no-cache"}
		ct   = []string{"text/plain; charset=utf-8"}
		body = []byte("302 Found\n")
		cl   = []string{"10"}
	)
	h := http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		hd := w.Header()
		hd["Location"] = []string{loc[0]}
		hd["Cache-Control"] = cc
		hd["Content-Type"] = ct
		hd["Content-Length"] = cl
		w.WriteHeader(http.StatusFound)
		_, _ = w.Write(body)
	})
	log.Fatal(redirect.NewHTTPServer(*addr, h).ListenAndServe())
}
