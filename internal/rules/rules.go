package rules

import (
	"fmt"
	"math/bits"
	"net/textproto"
	"strings"
	"time"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

// HeaderPeeker reads a request header by name (any case); nil or empty
// when absent. *fasthttp.RequestHeader is one.
type HeaderPeeker interface {
	Peek(key string) []byte
}

// Facts are what Evaluate reads of a request. The byte slices are only
// read during the call, never kept, so the redirector can pass fasthttp's
// own buffers.
type Facts struct {
	// UserAgent is the User-Agent header (devices conditions; the variant hash).
	UserAgent []byte
	// AcceptLanguage is the Accept-Language header (languages conditions).
	AcceptLanguage []byte
	// RawQuery is the request's query string without '?', still
	// percent-encoded (queryParams conditions).
	RawQuery []byte
	// Headers reads the other request headers (headers conditions); nil
	// matches no headers condition. It is asked for names in canonical
	// form (textproto.CanonicalMIMEHeaderKey: X-Campaign), so it may look
	// them up as they are (fasthttp's PeekCanonical).
	Headers HeaderPeeker
	// Now is the redirector's clock (after and before conditions).
	Now time.Time
	// Country is the client's ISO 3166-1 alpha-2 country as the header the
	// operator trusts says it (countries conditions); empty when the
	// operator names no such header, so countries conditions never hold.
	Country []byte
	// ClientAddr is the client's address as the redirector knows it (the
	// peer address, or the one a trusted proxy reports), in any stable
	// form: with UserAgent, it picks the client's variant.
	ClientAddr []byte
	// Device, when DeviceKnown, is Classify(UserAgent) as the redirector
	// remembered it (a keep-alive connection sends one User-Agent; reading
	// a long agent costs more than the rest of a click), so that Evaluate
	// need not read the agent again. Otherwise Evaluate classifies the
	// agent once, before it tries the rules, when one has devices.
	Device      Device
	DeviceKnown bool
	// AgentSum, when AgentSumKnown, is AgentSum(UserAgent) as the
	// redirector remembered it with the device class; otherwise Evaluate
	// reads the agent for the split.
	AgentSum      uint32
	AgentSumKnown bool
}

// Choice is where a click goes.
type Choice struct {
	// URL is the target, as the Compile call's locate function made it.
	URL string
	// Rule is the index in spec.rules of the rule that matched, or -1.
	Rule int
	// Variant is the index in spec.variants of the chosen variant, or -1:
	// a rule matched, or the click went to spec.url (see Split).
	Variant int
}

// Split reports whether the click went through the variant split (no rule
// matched and the link has variants): then it counts in
// status.variantUses, under SplitURL.
func (c *Compiled) Split(ch Choice) bool {
	return ch.Rule < 0 && len(c.variants) > 0
}

// SplitURL is the status.variantUses key of a split click: the variant's
// url or spec.url, as written in the spec.
func (c *Compiled) SplitURL(ch Choice) string {
	if ch.Variant >= 0 {
		return c.variants[ch.Variant].key
	}
	return c.defaultKey
}

// Compiled is a link's routing, ready for Evaluate. It is immutable: any
// number of goroutines may evaluate it at once.
type Compiled struct {
	defaultURL  string
	defaultKey  string
	rules       []compiledRule
	variants    []compiledVariant
	seed        uint64
	expiredURL  string
	forwardPath bool
	// reads are the facts some rule or the split reads; splitURLs the
	// status.variantUses keys of the split, spec.url first.
	reads     Fact
	splitURLs []string
	// byDevice[d] holds bit i when rule i may match a client of device
	// class d: it has no devices condition, or one that names d. Evaluate
	// tries only those rules, in order, so a click skips the rules of the
	// other devices without reading them.
	byDevice [numDevices]ruleSet
	// timed are the rules with a time window; localized those with
	// languages, and ranges each language range of theirs with the rules
	// that name it: Evaluate reads these conditions for all the rules in
	// the running at once, before it tries any rule (each costs less than
	// trying a rule).
	timed, localized ruleSet
	ranges           []languageRange
}

// languageRange is a languages condition's range and the rules that name it.
type languageRange struct {
	rng   string
	rules ruleSet
}

// ruleSet is a set of a link's rules, bit i for spec.rules[i].
type ruleSet uint32

// A ruleSet holds every rule a link may have.
var _ = [1]struct{}{}[linkv1.MaxRules/33]

// Fact is a fact of a request that a link's routing reads, so that the
// redirector gathers only those (a header lookup or a clock read is a
// good part of a plain redirect).
type Fact uint8

const (
	FactDevice   Fact = 1 << iota // Facts.Device or UserAgent: a devices condition
	FactLanguage                  // Facts.AcceptLanguage: a languages condition
	FactTime                      // Facts.Now: an after or before condition
	FactCountry                   // Facts.Country: a countries condition
	FactClient                    // Facts.ClientAddr and UserAgent: the split
)

type compiledRule struct {
	url       string
	devices   uint8 // bit 1<<Device; 0: no condition
	languages []string
	query     []queryMatch
	headers   []headerMatch
	after     int64 // Unix nanoseconds; hasAfter says whether set
	before    int64
	hasAfter  bool
	hasBefore bool
	countries []string
}

type queryMatch struct {
	name, value string
	hasValue    bool
}

type headerMatch struct{ name, value string }

type compiledVariant struct {
	url, key string
	// upTo is the variant's bucket bound: buckets [previous upTo, upTo) of
	// 0-99 go to it.
	upTo uint64
}

// Compile prepares a link's routing for Evaluate, once per spec. seed
// makes the variant split differ between links (so that one client is not
// in the first variant of every link): the link's namespace/name, the same
// on every replica. locate turns a target as written into what Choice.URL
// holds (the redirector's Location form); nil trims spaces. Compile refuses
// what the CRD refuses, for a spec that reached it another way.
func Compile(spec *linkv1.ShortLinkSpec, seed string, locate func(string) string) (*Compiled, error) {
	if locate == nil {
		locate = strings.TrimSpace
	}
	if len(spec.Rules) > linkv1.MaxRules {
		return nil, fmt.Errorf("spec.rules has %d rules, at most %d are allowed", len(spec.Rules), linkv1.MaxRules)
	}
	if len(spec.Variants) > linkv1.MaxVariants {
		return nil, fmt.Errorf("spec.variants has %d variants, at most %d are allowed", len(spec.Variants), linkv1.MaxVariants)
	}
	c := &Compiled{
		defaultURL:  locate(spec.URL),
		defaultKey:  spec.URL,
		seed:        hashString(fnvOffset, seed),
		forwardPath: spec.ForwardPath,
	}
	if spec.ExpiredURL != "" {
		c.expiredURL = locate(string(spec.ExpiredURL))
	}
	for i := range spec.Rules {
		r, err := compileRule(&spec.Rules[i], locate)
		if err != nil {
			return nil, fmt.Errorf("spec.rules[%d]: %w", i, err)
		}
		c.rules = append(c.rules, r)
	}
	var total uint64
	for i, v := range spec.Variants {
		if v.Weight < 1 || v.Weight > 100 {
			return nil, fmt.Errorf("spec.variants[%d].weight is %d: use a percentage from 1 to 100", i, v.Weight)
		}
		total += uint64(v.Weight)
		c.variants = append(c.variants, compiledVariant{url: locate(string(v.URL)), key: string(v.URL), upTo: total})
	}
	for i := range c.rules {
		c.reads |= c.rules[i].reads()
		r := &c.rules[i]
		for d := range c.byDevice {
			if r.devices == 0 || r.devices&(1<<d) != 0 {
				c.byDevice[d] |= 1 << i
			}
		}
		if r.hasAfter || r.hasBefore {
			c.timed |= 1 << i
		}
		if len(r.languages) > 0 {
			c.localized |= 1 << i
		}
	rangesOfRule:
		for _, l := range r.languages {
			for j := range c.ranges {
				if c.ranges[j].rng == l {
					c.ranges[j].rules |= 1 << i
					continue rangesOfRule
				}
			}
			c.ranges = append(c.ranges, languageRange{rng: l, rules: 1 << i})
		}
	}
	if len(c.variants) > 0 {
		c.reads |= FactClient
		c.splitURLs = append(c.splitURLs, c.defaultKey)
		for _, v := range c.variants {
			c.splitURLs = append(c.splitURLs, v.key)
		}
	}
	if total > 100 {
		return nil, fmt.Errorf("the weights of spec.variants add up to %d: they are percentages, spec.url takes what they leave of 100", total)
	}
	return c, nil
}

func compileRule(r *linkv1.RedirectRule, locate func(string) string) (compiledRule, error) {
	out := compiledRule{url: locate(string(r.URL))}
	for _, d := range r.Devices {
		dev, ok := parseDevice(d)
		if !ok {
			return out, fmt.Errorf("unknown device class %q: use ios, android, desktop or bot", d)
		}
		out.devices |= 1 << dev
	}
	for _, l := range r.Languages {
		if !validRange(l) {
			return out, fmt.Errorf("language range %q is not a language tag such as de or pt-BR", l)
		}
		out.languages = append(out.languages, strings.ToLower(l))
	}
	for _, q := range r.QueryParams {
		if q.Name == "" {
			return out, fmt.Errorf("a queryParams condition needs a name")
		}
		m := queryMatch{name: q.Name}
		if q.Value != nil {
			m.value, m.hasValue = *q.Value, true
		}
		out.query = append(out.query, m)
	}
	for _, h := range r.Headers {
		if h.Name == "" {
			return out, fmt.Errorf("a headers condition needs a name")
		}
		// Canonical (X-Campaign), so that a peeker can look it up as its
		// server stores names, without normalizing it per click.
		out.headers = append(out.headers, headerMatch{name: textproto.CanonicalMIMEHeaderKey(h.Name), value: h.Value})
	}
	if r.After != nil {
		out.after, out.hasAfter = r.After.UnixNano(), true
	}
	if r.Before != nil {
		out.before, out.hasBefore = r.Before.UnixNano(), true
	}
	for _, c := range r.Countries {
		if len(c) != 2 {
			return out, fmt.Errorf("country %q is not an ISO 3166-1 alpha-2 code such as DE", c)
		}
		out.countries = append(out.countries, strings.ToUpper(c))
	}
	if out.devices == 0 && len(out.languages) == 0 && len(out.query) == 0 && len(out.headers) == 0 &&
		!out.hasAfter && !out.hasBefore && len(out.countries) == 0 {
		return out, fmt.Errorf("a rule needs at least one condition")
	}
	return out, nil
}

// reads are the facts the rule's conditions read.
func (r *compiledRule) reads() Fact {
	var f Fact
	if r.devices != 0 {
		f |= FactDevice
	}
	if len(r.languages) > 0 {
		f |= FactLanguage
	}
	if r.hasAfter || r.hasBefore {
		f |= FactTime
	}
	if len(r.countries) > 0 {
		f |= FactCountry
	}
	return f
}

// Reads are the facts Evaluate may read of this link's clicks: a fact not
// in it may be left empty in Facts. (RawQuery and Headers are always read
// as given.)
func (c *Compiled) Reads() Fact { return c.reads }

// SplitURLs are the status.variantUses keys of the split in the order of
// SplitSlot: spec.url, then each variant's url as written (none without
// variants). The caller must not modify it.
func (c *Compiled) SplitURLs() []string { return c.splitURLs }

// SplitSlot is the index in SplitURLs of a split click's destination.
func SplitSlot(ch Choice) int { return ch.Variant + 1 }

// Plain reports whether every click goes to spec.url: no rules, no variants.
func (c *Compiled) Plain() bool { return len(c.rules) == 0 && len(c.variants) == 0 }

// Rules and Variants are how many the link has.
func (c *Compiled) Rules() int    { return len(c.rules) }
func (c *Compiled) Variants() int { return len(c.variants) }

// ExpiredURL is where a finished link sends clicks (as locate made it), or
// "" to answer as before (410 Gone or the namespace's fallback).
func (c *Compiled) ExpiredURL() string { return c.expiredURL }

// ForwardPath reports whether the rest of the short URL's path goes to the
// target (AppendPath).
func (c *Compiled) ForwardPath() bool { return c.forwardPath }

// Evaluate returns where a click with facts f goes: the first rule whose
// conditions all hold, else the client's variant, else spec.url. It does
// not allocate, classifies the User-Agent at most once (not at all when
// f.DeviceKnown), and reads each other fact at most once, when a rule
// first needs it.
func Evaluate(f *Facts, c *Compiled) Choice {
	if len(c.rules) > 0 {
		if i := c.firstMatch(f); i >= 0 {
			return Choice{URL: c.rules[i].url, Rule: i, Variant: -1}
		}
	}
	if len(c.variants) > 0 {
		sum := f.AgentSum
		if !f.AgentSumKnown {
			sum = AgentSum(f.UserAgent)
		}
		b := bucket(c.seed, f.ClientAddr, sum)
		for i := range c.variants {
			if b < c.variants[i].upTo {
				return Choice{URL: c.variants[i].url, Rule: -1, Variant: i}
			}
		}
	}
	return Choice{URL: c.defaultURL, Rule: -1, Variant: -1}
}

// firstMatch is the index of the first rule whose conditions hold, or -1.
// The rules that may match are those of the client's device class
// (byDevice), less those whose time window is closed and those whose
// languages the client does not prefer, each read once for all the rules
// that have them; each of the rest is then tried in order for its other
// conditions. (Reading every kind of condition so, with sets of rules,
// cost more than trying a rule: only these three pay.)
func (c *Compiled) firstMatch(f *Facts) int {
	device := f.Device
	if !f.DeviceKnown && c.reads&FactDevice != 0 {
		device = Classify(f.UserAgent)
	}
	if device >= numDevices {
		device = DeviceUnknown // a class no rule names
	}
	running := c.byDevice[device]
	if set := running & c.timed; set != 0 {
		now := f.Now.UnixNano()
		for ; set != 0; set &= set - 1 {
			if r := &c.rules[bits.TrailingZeros32(uint32(set))]; r.hasAfter && now < r.after || r.hasBefore && now >= r.before {
				running &^= set & -set
			}
		}
	}
	if set := running & c.localized; set != 0 {
		lang, held := PreferredLanguage(f.AcceptLanguage), ruleSet(0)
		for i := range c.ranges {
			if matchesRange(lang, c.ranges[i].rng) {
				held |= c.ranges[i].rules
			}
		}
		running &^= set &^ held
	}
	for ; running != 0; running &= running - 1 {
		if i := bits.TrailingZeros32(uint32(running)); c.rules[i].others(f) {
			return i
		}
	}
	return -1
}

// others reports whether the rule's conditions that firstMatch does not
// read for all the rules at once hold, the cheap ones read first: the
// country, the query, the headers.
func (r *compiledRule) others(f *Facts) bool {
	if len(r.countries) > 0 && !matchesCountry(f.Country, r.countries) {
		return false
	}
	for i := range r.query {
		if !queryHolds(f.RawQuery, &r.query[i]) {
			return false
		}
	}
	for i := range r.headers {
		if f.Headers == nil || string(f.Headers.Peek(r.headers[i].name)) != r.headers[i].value {
			return false
		}
	}
	return true
}

// matchesCountry reports whether country (spaces around it ignored, any
// ASCII case) is one of the upper-case codes.
func matchesCountry(country []byte, codes []string) bool {
	country = trimSpace(country)
	if len(country) != 2 {
		return false
	}
	a, b := upperASCII(country[0]), upperASCII(country[1])
	for _, code := range codes {
		if code[0] == a && code[1] == b {
			return true
		}
	}
	return false
}

func upperASCII(c byte) byte {
	if 'a' <= c && c <= 'z' {
		return c - 'a' + 'A'
	}
	return c
}

func trimSpace(s []byte) []byte {
	for len(s) > 0 && (s[0] == ' ' || s[0] == '\t') {
		s = s[1:]
	}
	for len(s) > 0 && (s[len(s)-1] == ' ' || s[len(s)-1] == '\t') {
		s = s[:len(s)-1]
	}
	return s
}
