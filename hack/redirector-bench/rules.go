package main

import (
	"fmt"
	"net/netip"
	"time"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/hitpath"
	"github.com/linkforge/linkforge/internal/redirect"
	"github.com/linkforge/linkforge/internal/rules"
)

// Link kinds (--link-kind): plain links, or links with 8 rules and 3
// variants (benchlinks.WithRules), for the cost of routing
// (hack/callgrind-bench -only rules,plain).
const (
	kindPlain = "plain"
	kindRules = "rules"
)

// browserTarget is where a browser's request (hitpath.Options.Browser)
// from 127.0.0.1 goes on link l: the Location the benchmark's client
// checks.
func browserTarget(l *linkv1.ShortLink) (string, error) {
	c, err := rules.Compile(&l.Spec, l.Namespace+"/"+l.Name, redirect.Location)
	if err != nil {
		return "", fmt.Errorf("link %s: %w", l.Name, err)
	}
	f := rules.Facts{
		UserAgent: []byte(hitpath.BrowserUserAgent), AcceptLanguage: []byte(hitpath.BrowserAcceptLanguage),
		RawQuery: []byte(hitpath.BrowserQuery), Headers: noHeaders{}, Now: time.Now(),
		Client: netip.AddrFrom4([4]byte{127, 0, 0, 1}),
	}
	return rules.Evaluate(&f, c).URL, nil
}

type noHeaders struct{}

func (noHeaders) Peek(string) []byte { return nil }
