package rules

import (
	"fmt"
	"strings"
	"time"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

// Describe says in words, one line each and in the order they apply, where
// a link's clicks go: its rules, its split, its expired URL and path
// forwarding, for the preview page and the CLI. Targets are as written
// (trimmed); the caller escapes them for its output. A plain link gives
// one line.
func Describe(spec *linkv1.ShortLinkSpec) []string {
	var out []string
	for _, r := range spec.Rules {
		out = append(out, fmt.Sprintf("Clicks %s go to %s.", conditionsInWords(&r), strings.TrimSpace(string(r.URL))))
	}
	others := "Clicks"
	if len(spec.Rules) > 0 {
		others = "Other clicks"
	}
	if len(spec.Variants) == 0 {
		out = append(out, fmt.Sprintf("%s go to %s.", others, strings.TrimSpace(spec.URL)))
	} else {
		rest := int32(100)
		parts := make([]string, 0, len(spec.Variants)+1)
		for _, v := range spec.Variants {
			rest -= v.Weight
			parts = append(parts, fmt.Sprintf("%d%% to %s", v.Weight, strings.TrimSpace(string(v.URL))))
		}
		if rest > 0 {
			parts = append(parts, fmt.Sprintf("%d%% to %s", rest, strings.TrimSpace(spec.URL)))
		}
		out = append(out, fmt.Sprintf("%s are split, each visitor keeping their share: %s.", others, strings.Join(parts, ", ")))
		if end := spec.VariantsEnd; end != nil {
			out = append(out, fmt.Sprintf("From %s on, they all go to %s.", end.At.UTC().Format(time.RFC3339), strings.TrimSpace(end.URL)))
		}
	}
	if spec.ExpiredURL != "" {
		out = append(out, fmt.Sprintf("Once the link has finished, clicks go to %s.", strings.TrimSpace(string(spec.ExpiredURL))))
	}
	if spec.ForwardPath {
		out = append(out, "What follows the short URL's path is added to the destination's path.")
	}
	return out
}

// conditionsInWords is a rule's conditions as a phrase: "from iOS or
// Android devices and with ?beta=1".
func conditionsInWords(r *linkv1.RedirectRule) string {
	var c []string
	if len(r.Devices) > 0 {
		names := make([]string, len(r.Devices))
		for i, d := range r.Devices {
			names[i] = map[linkv1.DeviceClass]string{
				linkv1.DeviceIOS: "iOS", linkv1.DeviceAndroid: "Android", linkv1.DeviceDesktop: "desktop", linkv1.DeviceBot: "bot",
			}[d]
		}
		c = append(c, "from "+orList(names)+" clients")
	}
	if len(r.Languages) > 0 {
		c = append(c, "preferring "+orList(r.Languages))
	}
	for _, q := range r.QueryParams {
		if q.Value == nil {
			c = append(c, fmt.Sprintf("with the query parameter %q", q.Name))
		} else {
			c = append(c, fmt.Sprintf("with %s=%s in the query", q.Name, *q.Value))
		}
	}
	for _, h := range r.Headers {
		c = append(c, fmt.Sprintf("with the header %s: %s", h.Name, h.Value))
	}
	switch {
	case r.After != nil && r.Before != nil:
		c = append(c, "between "+r.After.UTC().Format(time.RFC3339)+" and "+r.Before.UTC().Format(time.RFC3339))
	case r.After != nil:
		c = append(c, "from "+r.After.UTC().Format(time.RFC3339)+" on")
	case r.Before != nil:
		c = append(c, "before "+r.Before.UTC().Format(time.RFC3339))
	}
	if len(r.Countries) > 0 {
		c = append(c, "in "+orList(r.Countries))
	}
	return strings.Join(c, " and ")
}

func orList(s []string) string {
	if len(s) <= 1 {
		return strings.Join(s, "")
	}
	return strings.Join(s[:len(s)-1], ", ") + " or " + s[len(s)-1]
}
