// Command fasthttp-floor is the floor of hack/bench-redirect.sh and
// hack/callgrind-bench: bare fasthttp (default settings) answering 302 from
// a map of the same paths, with the redirector's headers and body, and
// nothing else: no index, expiry, metrics or limits. It does the least the
// library needs to give those answers: the map is keyed by the request
// target as sent (no URI parsing or path normalization), and the headers
// are set by their canonical names (SetCanonical, as the redirector does:
// Set would normalize each name on every request). The server keeps
// fasthttp's default settings, which read the clock for each request (70
// instructions; the redirector sets LazyRequestTime). The redirector's cost
// over it is what linkforge adds to the library, less what its yield
// before a read saves (see internal/redirect/readyield.go; the floor reads
// right after each response).
//
// Until 2026-11-26 it looked the path up with ctx.Path() (the parsed and
// normalized URI) and set the headers with Set: 1,280 instructions a
// request more than this (12,585 against 11,303 in hack/callgrind-bench),
// which made the floor costlier than the redirector.
package main

import (
	"bufio"
	"flag"
	"log"
	"os"
	"strings"

	"github.com/valyala/fasthttp"
)

var (
	keyLocation     = []byte("Location")
	keyCacheControl = []byte("Cache-Control")
	noCache         = []byte("private, no-cache")
	textPlain       = []byte("text/plain; charset=utf-8")
	body            = []byte("302 Found\n")
)

func main() {
	addr := flag.String("bind-address", "127.0.0.1:18070", "listen address")
	table := flag.String("table", "", "file of 'namespace code url' lines")
	flag.Parse()
	f, err := os.Open(*table)
	if err != nil {
		log.Fatal(err)
	}
	targets := map[string][]byte{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) == 3 {
			targets["/"+fs[0]+"/"+fs[1]] = []byte(fs[2])
		}
	}
	log.Fatal(fasthttp.ListenAndServe(*addr, func(ctx *fasthttp.RequestCtx) {
		loc, ok := targets[string(ctx.Request.Header.RequestURI())]
		if !ok {
			ctx.SetStatusCode(404)
			return
		}
		h := &ctx.Response.Header
		h.SetStatusCode(302)
		h.SetCanonical(keyLocation, loc)
		h.SetCanonical(keyCacheControl, noCache)
		h.SetContentTypeBytes(textPlain)
		ctx.Response.SetBodyRaw(body)
	}))
}
