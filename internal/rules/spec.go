package rules

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/claim"
	"github.com/linkforge/linkforge/internal/shortcode"
)

// Target is one destination of a link other than spec.url.
type Target struct {
	// Field is where the spec holds it, e.g. spec.rules[2].url.
	Field string
	// URL is as written in the spec.
	URL string
}

// Targets lists a link's URLs other than spec.url, in spec order: the
// rules', the variants', spec.expiredURL, then the card's image (not a
// destination, but a URL the link makes previewers fetch). Each is
// canonicalized, validated and judged by the destination policy as
// spec.url is.
func Targets(spec *linkv1.ShortLinkSpec) []Target {
	image := cardImage(spec)
	if len(spec.Rules) == 0 && len(spec.Variants) == 0 && spec.ExpiredURL == "" && image == "" {
		return nil
	}
	out := make([]Target, 0, len(spec.Rules)+len(spec.Variants)+2)
	for i := range spec.Rules {
		out = append(out, Target{Field: fmt.Sprintf("spec.rules[%d].url", i), URL: string(spec.Rules[i].URL)})
	}
	for i := range spec.Variants {
		out = append(out, Target{Field: fmt.Sprintf("spec.variants[%d].url", i), URL: string(spec.Variants[i].URL)})
	}
	if spec.ExpiredURL != "" {
		out = append(out, Target{Field: "spec.expiredURL", URL: string(spec.ExpiredURL)})
	}
	if image != "" {
		out = append(out, Target{Field: "spec.card.image", URL: image})
	}
	return out
}

// cardImage is spec.card.image, or "".
func cardImage(spec *linkv1.ShortLinkSpec) string {
	if spec.Card == nil {
		return ""
	}
	return string(spec.Card.Image)
}

// Identity is link's target as the ownership rule reads it
// (claim.Link.Target): what a redirect of it does, by which links share a
// code. canonical is its
// canonical URL: the one computed now for the link being decided, its
// status.canonicalURL for the others (what the redirectors serve). A link
// whose routing does not canonicalize gets a target no other link has: it
// holds no code anyway.
func Identity(link *linkv1.ShortLink, canonical string) string {
	var expiresAt, activatesAt *time.Time
	if at, ok := link.Expiry(); ok {
		expiresAt = &at
	}
	if at, ok := link.Activation(); ok {
		activatesAt = &at
	}
	var idle *time.Duration
	if link.Spec.IdleTimeout != nil {
		idle = &link.Spec.IdleTimeout.Duration
	}
	key, err := Key(&link.Spec)
	if err != nil {
		key = "\x00invalid routing " + string(link.UID) + "/" + link.Name
	}
	return claim.TargetKey(canonical, expiresAt, activatesAt, idle, link.Spec.MaxUses, int32(link.RedirectStatusCode()), link.Spec.ForwardQuery) + key
}

// Key is the part of a link's dedup identity that its routing adds to
// claim.TargetKey: links share a code only when their rules, variants,
// variantsEnd, expiredURL and forwardPath are identical too (targets compared in
// canonical form, conditions as the redirector reads them: device and
// language sets in any order and case), and so is their card (two links
// sharing a code would show previewers one of their cards). It is "" for
// a link with none of them, so such a link keeps the identity it had
// before they existed. An error means a target does not canonicalize.
func Key(spec *linkv1.ShortLinkSpec) (string, error) {
	if len(spec.Rules) == 0 && len(spec.Variants) == 0 && spec.VariantsEnd == nil && spec.ExpiredURL == "" && !spec.ForwardPath && spec.Card == nil {
		return "", nil
	}
	var b strings.Builder
	b.WriteString("\x00routing")
	canonical := func(field, raw string) error {
		c, err := shortcode.Canonicalize(raw)
		if err != nil {
			return fmt.Errorf("%s: %w", field, err)
		}
		b.WriteString(strconv.Quote(c))
		return nil
	}
	if spec.ForwardPath {
		b.WriteString(" path")
	}
	if card := spec.Card; card != nil {
		fmt.Fprintf(&b, " card=%q,%q,", card.Title, card.Description)
		if card.Image != "" {
			if err := canonical("spec.card.image", string(card.Image)); err != nil {
				return "", err
			}
		}
	}
	if spec.ExpiredURL != "" {
		b.WriteString(" expired=")
		if err := canonical("spec.expiredURL", string(spec.ExpiredURL)); err != nil {
			return "", err
		}
	}
	for i := range spec.Rules {
		r := &spec.Rules[i]
		fmt.Fprintf(&b, " rule%d=", i)
		if err := canonical(fmt.Sprintf("spec.rules[%d].url", i), string(r.URL)); err != nil {
			return "", err
		}
		c, err := compileRule(r, strings.TrimSpace)
		if err != nil {
			return "", fmt.Errorf("spec.rules[%d]: %w", i, err)
		}
		writeRule(&b, &c)
	}
	for i, v := range spec.Variants {
		fmt.Fprintf(&b, " variant%d=%d:", i, v.Weight)
		if err := canonical(fmt.Sprintf("spec.variants[%d].url", i), string(v.URL)); err != nil {
			return "", err
		}
	}
	if end := spec.VariantsEnd; end != nil {
		slot, err := endSlot(spec)
		if err != nil {
			return "", err
		}
		fmt.Fprintf(&b, " end=%d:%d", end.At.UnixNano(), slot)
	}
	return b.String(), nil
}

// writeRule writes a rule's conditions, sets sorted.
func writeRule(b *strings.Builder, r *specRule) {
	fmt.Fprintf(b, " devices=%d", r.devices)
	b.WriteString(" languages=")
	b.WriteString(strconv.Quote(sortedJoin(r.languages)))
	for _, q := range r.query {
		fmt.Fprintf(b, " query=%q", q.name)
		if q.hasValue {
			fmt.Fprintf(b, "=%q", q.value)
		}
	}
	for _, h := range r.headers {
		fmt.Fprintf(b, " header=%q=%q", strings.ToLower(h.name), h.value)
	}
	if r.hasAfter {
		fmt.Fprintf(b, " after=%d", r.after)
	}
	if r.hasBefore {
		fmt.Fprintf(b, " before=%d", r.before)
	}
	b.WriteString(" countries=")
	b.WriteString(strconv.Quote(sortedJoin(r.countries)))
}

func sortedJoin(s []string) string {
	c := append([]string(nil), s...)
	slices.Sort(c)
	return strings.Join(c, ",")
}
