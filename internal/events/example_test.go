package events_test

import (
	"context"
	"flag"
	"fmt"
	"net"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/linkforge/linkforge/internal/events"
)

// The redirector's wiring: the flags, a Pipeline when a sink is set, a
// Record per answered request, Close on shutdown.
func Example() {
	var flags events.Flags
	fs := flag.NewFlagSet("redirector", flag.ContinueOnError)
	flags.Bind(fs)
	_ = fs.Parse([]string{"--events-otlp-endpoint=http://127.0.0.1:4318"})

	cfg, err := flags.Config()
	if err != nil || !cfg.Enabled() {
		return
	}
	cfg.Registerer = prometheus.NewRegistry() // the redirector's registry
	cfg.Instance = "linkforge-redirector-0"   // $POD_NAME
	pipeline, err := events.New(cfg)
	if err != nil {
		fmt.Println(err)
		return
	}

	// In the handler, after the answer: strings the index holds, bytes of
	// the request (copied).
	rec := events.Record{
		Namespace: "team-a", Name: "docs", UID: "3f1c2a4e-8b9d-4c7e-a1f2-0e9d8c7b6a55",
		Target: "https://example.com/docs", Status: 302, Rule: events.NoRule, Variant: events.NoVariant,
	}
	rec.SetCode([]byte("docs"))
	rec.SetReferer([]byte("https://news.example.org/item?id=1"))
	rec.SetUserAgent([]byte("Mozilla/5.0 (iPhone; CPU iPhone OS 17_5 like Mac OS X)"))
	rec.SetCountry([]byte("DE")) // the --country-header's value, when set
	rec.SetClientIP(net.ParseIP("198.51.100.23"))
	fmt.Println(pipeline.Offer(&rec))

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	_ = pipeline.Close(ctx) // nothing listens on 127.0.0.1:4318 here: the event is dropped at the deadline
	// Output: true
}
