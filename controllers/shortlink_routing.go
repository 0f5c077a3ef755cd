package controllers

import (
	"fmt"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/hostpolicy"
	"github.com/linkforge/linkforge/internal/rules"
	"github.com/linkforge/linkforge/internal/shortcode"
)

// This file holds the parts of the ShortLink reconciler for a link's
// targets besides spec.url (spec.rules, spec.variants, spec.expiredURL,
// internal/rules): each is canonicalized and judged by the destination
// policy as spec.url is, and they are part of the link's dedup identity.

// routedTarget is one of a link's targets other than spec.url, canonical.
type routedTarget struct {
	field     string
	canonical string
}

// invalidTarget is why a link's targets cannot be served: a field and what
// is wrong with it.
type invalidTarget struct {
	field string
	err   error
}

func (e *invalidTarget) Error() string {
	if e.field == "" {
		return e.err.Error()
	}
	return fmt.Sprintf("%s is not a valid URL: %v", e.field, e.err)
}

// canonicalTargets canonicalizes the link's other targets and checks its
// rules and variants as the redirectors will compile them.
func canonicalTargets(link *linkv1.ShortLink) ([]routedTarget, *invalidTarget) {
	targets := rules.Targets(&link.Spec)
	out := make([]routedTarget, 0, len(targets))
	for _, t := range targets {
		c, err := shortcode.Canonicalize(t.URL)
		if err != nil {
			return nil, &invalidTarget{field: t.Field, err: err}
		}
		out = append(out, routedTarget{field: t.Field, canonical: c})
	}
	if len(targets) > 0 {
		if _, err := rules.Compile(&link.Spec, "", nil); err != nil {
			return nil, &invalidTarget{err: err}
		}
	}
	return out, nil
}

// judgeTargets applies the destination policy to every target: spec.url's
// verdict first, then the others'; the first refusal blocks the link as a
// whole, its message naming the field.
func judgeTargets(p hostpolicy.Policy, canonical string, targets []routedTarget) hostpolicy.Verdict {
	if v := p.Judge(canonical); !v.Allowed {
		return v
	}
	for _, t := range targets {
		if v := p.Judge(t.canonical); !v.Allowed {
			v.Message = t.field + ": " + v.Message
			return v
		}
	}
	return hostpolicy.Verdict{Allowed: true}
}

// routingHostMatches reports whether a host pattern list matches the host
// of one of the link's targets besides spec.url (a deny list change
// re-queues such a link).
func routingHostMatches(link *linkv1.ShortLink, changed hostpolicy.List) bool {
	for _, t := range rules.Targets(&link.Spec) {
		c, err := shortcode.Canonicalize(t.URL)
		if err != nil {
			continue
		}
		if _, ok := changed.Match(hostpolicy.Key(hostpolicy.HostOf(c))); ok {
			return true
		}
	}
	return false
}
