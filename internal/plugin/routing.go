package plugin

import (
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/rules"
	"github.com/linkforge/linkforge/internal/shortcode"
)

// create's --rule and --variant take a rule or a variant as KEY=VALUE
// words separated by spaces, one flag per rule or variant, in order; what
// does not fit on a command line (a header value with spaces) goes in the
// manifest that --dry-run=client -o yaml prints.

const routingUsage = `
Rules and variants (docs/api.md, "Rules" and "Variants"):
  --rule 'url=URL COND...'     a redirect rule, tried in the order given; the first whose
                               conditions all hold wins. Conditions (at least one):
                                 device=ios,android,desktop,bot   language=de,pt-BR
                                 query=NAME (present)   query=NAME=VALUE (equals)
                                 header=NAME=VALUE   after=TIME   before=TIME (RFC 3339)
                                 country=CH,LI (needs the redirector's --country-header)
                               query and header may repeat.
  --variant 'url=URL weight=N' a variant taking N percent of the clicks no rule matches;
                               URL takes what the variants leave of 100.
  --variants-end 'at=TIME url=URL'
                               end the split at TIME (RFC 3339): from then on the clicks no
                               rule matches all go to URL, the link's URL or a variant's.
  --expired-url URL            where clicks go once the link has finished, instead of 410
  --forward-path               append the rest of the short URL's path to the target
`

// urlKey is the key of a rule's or a variant's target.
const urlKey = "url"

// parseRule reads one --rule.
func parseRule(s string) (linkv1.RedirectRule, error) {
	var r linkv1.RedirectRule
	err := eachWord(s, func(key, value string) error {
		switch key {
		case urlKey:
			r.URL = linkv1.TargetURL(value)
		case "device":
			for _, d := range strings.Split(value, ",") {
				r.Devices = append(r.Devices, linkv1.DeviceClass(d))
			}
		case "language":
			r.Languages = append(r.Languages, strings.Split(value, ",")...)
		case "country":
			r.Countries = append(r.Countries, strings.Split(value, ",")...)
		case "query":
			name, v, hasValue := strings.Cut(value, "=")
			q := linkv1.QueryParamMatch{Name: name}
			if hasValue {
				q.Value = &v
			}
			r.QueryParams = append(r.QueryParams, q)
		case "header":
			name, v, ok := strings.Cut(value, "=")
			if !ok {
				return fmt.Errorf("header=%s: write header=NAME=VALUE", value)
			}
			r.Headers = append(r.Headers, linkv1.HeaderMatch{Name: name, Value: v})
		case "after", "before":
			at, err := time.Parse(time.RFC3339, value)
			if err != nil {
				return fmt.Errorf("%s=%s: use an RFC 3339 time such as 2030-01-02T15:04:05Z", key, value)
			}
			t := metav1.NewTime(at.UTC())
			if key == "after" {
				r.After = &t
			} else {
				r.Before = &t
			}
		default:
			return fmt.Errorf("unknown key %q: use url, device, language, query, header, after, before or country", key)
		}
		return nil
	})
	if err == nil && r.URL == "" {
		err = fmt.Errorf("no url=: a rule needs its target")
	}
	return r, err
}

// parseVariant reads one --variant.
func parseVariant(s string) (linkv1.Variant, error) {
	var v linkv1.Variant
	err := eachWord(s, func(key, value string) error {
		switch key {
		case urlKey:
			v.URL = linkv1.TargetURL(value)
		case "weight":
			w, err := strconv.ParseInt(strings.TrimSuffix(value, "%"), 10, 32)
			if err != nil || w < 1 || w > 100 {
				return fmt.Errorf("weight=%s: use a percentage from 1 to 100", value)
			}
			v.Weight = int32(w)
		default:
			return fmt.Errorf("unknown key %q: use url and weight", key)
		}
		return nil
	})
	if err == nil && (v.URL == "" || v.Weight == 0) {
		err = fmt.Errorf("a variant needs url= and weight=")
	}
	return v, err
}

// parseVariantsEnd reads --variants-end.
func parseVariantsEnd(s string) (*linkv1.VariantsEnd, error) {
	var e linkv1.VariantsEnd
	err := eachWord(s, func(key, value string) error {
		switch key {
		case urlKey:
			e.URL = value
		case "at":
			at, err := time.Parse(time.RFC3339, value)
			if err != nil {
				return fmt.Errorf("at=%s: use an RFC 3339 time such as 2030-01-02T15:04:05Z", value)
			}
			e.At = metav1.NewTime(at.UTC())
		default:
			return fmt.Errorf("unknown key %q: use at and url", key)
		}
		return nil
	})
	if err == nil && (e.URL == "" || e.At.IsZero()) {
		err = fmt.Errorf("the end of the split needs at= and url=")
	}
	return &e, err
}

// eachWord calls fn with each KEY=VALUE word of s.
func eachWord(s string, fn func(key, value string) error) error {
	words := strings.Fields(s)
	if len(words) == 0 {
		return fmt.Errorf("empty")
	}
	for _, w := range words {
		key, value, ok := strings.Cut(w, "=")
		if !ok || value == "" {
			return fmt.Errorf("%q is not KEY=VALUE", w)
		}
		if err := fn(key, value); err != nil {
			return err
		}
	}
	return nil
}

// setRouting puts the routing flags into the link's spec and checks them
// as the controller will: every target canonicalizes, the rules and
// variants compile.
func (o *createOptions) setRouting(spec *linkv1.ShortLinkSpec) error {
	for i, s := range o.rules {
		r, err := parseRule(s)
		if err != nil {
			return usageErrorf("create", "invalid --rule %q (rule %d): %v", s, i+1, err)
		}
		spec.Rules = append(spec.Rules, r)
	}
	for i, s := range o.variants {
		v, err := parseVariant(s)
		if err != nil {
			return usageErrorf("create", "invalid --variant %q (variant %d): %v", s, i+1, err)
		}
		spec.Variants = append(spec.Variants, v)
	}
	if o.variantsEnd != "" {
		end, err := parseVariantsEnd(o.variantsEnd)
		if err != nil {
			return usageErrorf("create", "invalid --variants-end %q: %v", o.variantsEnd, err)
		}
		spec.VariantsEnd = end
	}
	spec.ExpiredURL = linkv1.TargetURL(o.expiredURL)
	spec.ForwardPath = o.forwardPath
	for _, t := range rules.Targets(spec) {
		if _, err := shortcode.Canonicalize(t.URL); err != nil {
			return notReadyErrorf("invalid URL %q in %s: %v", t.URL, flagOf(t.Field), err)
		}
	}
	if _, err := rules.Compile(spec, "", nil); err != nil {
		return usageErrorf("create", "%s", flagOf(err.Error()))
	}
	return nil
}

var specField = regexp.MustCompile(`spec\.(rules|variantsEnd|variants)(\[([0-9]+)\](\.url)?)?(\.url)?|spec\.expiredURL`)

// flagOf names, in a message about spec fields, the flags that set them:
// spec.rules[0].url is --rule 1, spec.variants --variant.
func flagOf(msg string) string {
	return specField.ReplaceAllStringFunc(msg, func(field string) string {
		m := specField.FindStringSubmatch(field)
		flag := map[string]string{"rules": "--rule", "variants": "--variant", "variantsEnd": "--variants-end", "": "--expired-url"}[m[1]]
		if m[3] == "" {
			return flag
		}
		i, _ := strconv.Atoi(m[3])
		return flag + " " + strconv.Itoa(i+1)
	})
}

// routingFields are the routing parts of a spec for specDiff.
func routingFields(s *linkv1.ShortLinkSpec, unset string) [][2]string {
	js := func(v any, empty bool) string {
		if empty {
			return unset
		}
		b, _ := json.Marshal(v)
		return string(b)
	}
	expired := unset
	if s.ExpiredURL != "" {
		expired = strconv.Quote(string(s.ExpiredURL))
	}
	return [][2]string{
		{"rules", js(s.Rules, len(s.Rules) == 0)},
		{"variants", js(s.Variants, len(s.Variants) == 0)},
		{"variantsEnd", js(s.VariantsEnd, s.VariantsEnd == nil)},
		{"expiredURL", expired},
		{"forwardPath", strconv.FormatBool(s.ForwardPath)},
	}
}
