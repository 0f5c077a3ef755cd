// Command fasthttp-floor is the floor of hack/bench-redirect.sh: bare
// fasthttp (default settings) answering 302 from a map of the same paths,
// with the redirector's headers and body, and nothing else: no index,
// expiry, metrics or limits. The redirector's cost over it is what linkforge
// adds to the library, less what its yield before a read saves (see
// internal/redirect/readyield.go; the floor reads right after each response).
package main

import (
	"bufio"
	"flag"
	"log"
	"os"
	"strings"

	"github.com/valyala/fasthttp"
)

func main() {
	addr := flag.String("bind-address", "127.0.0.1:18070", "listen address")
	table := flag.String("table", "", "file of 'namespace code url' lines")
	flag.Parse()
	f, err := os.Open(*table)
	if err != nil {
		log.Fatal(err)
	}
	targets := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if fs := strings.Fields(sc.Text()); len(fs) == 3 {
			targets["/"+fs[0]+"/"+fs[1]] = fs[2]
		}
	}
	body := []byte("302 Found\n")
	log.Fatal(fasthttp.ListenAndServe(*addr, func(ctx *fasthttp.RequestCtx) {
		loc, ok := targets[string(ctx.Path())]
		if !ok {
			ctx.SetStatusCode(404)
			return
		}
		ctx.SetStatusCode(302)
		ctx.Response.Header.Set("Location", loc)
		ctx.Response.Header.Set("Cache-Control", "private, no-cache")
		ctx.SetContentType("text/plain; charset=utf-8")
		ctx.Response.SetBodyRaw(body)
	}))
}
