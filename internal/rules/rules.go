package rules

import (
	"fmt"
	"math"
	"math/bits"
	"net/netip"
	"net/textproto"
	"slices"
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
	// Client is the client's address as the redirector knows it (the
	// peer's, or the one a trusted proxy reports: internal/clientaddr):
	// with UserAgent, it picks the client's variant.
	Client netip.Addr
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
	// a rule matched, or the click went to spec.url (see Split), or the
	// split had ended.
	Variant int
	// Ended says the split had ended (spec.variantsEnd): no rule matched,
	// and the click went to variantsEnd.url, outside the split.
	Ended bool
}

// Split reports whether the click went through the variant split (no rule
// matched, the link has variants and its split has not ended): then it
// counts in status.variantUses, under SplitURL.
func (c *Compiled) Split(ch Choice) bool {
	return ch.Rule < 0 && c.nVariants > 0 && !ch.Ended
}

// SplitURL is the status.variantUses key of a split click: the variant's
// url or spec.url, as written in the spec.
func (c *Compiled) SplitURL(ch Choice) string {
	return c.splitURLs[SplitSlot(ch)]
}

// Unsplit is the choice of spec.url outside the split: where a click that
// must not count in status.variantUses goes (a link previewer's) when
// Evaluate chose a destination of the split.
func (c *Compiled) Unsplit() Choice {
	return Choice{URL: c.text[:c.splitEnd[0]], Rule: -1, Variant: -1}
}

// Compiled is a link's routing, ready for Evaluate. It is immutable: any
// number of goroutines may evaluate it at once.
//
// It is laid out for the cache, not as the spec reads: among thousands of
// links, a click finds none of its link's routing in the CPU's caches, and
// each cache line it reads is a trip to memory that costs more than the
// rules' instructions (docs/performance.md, "Cache lines a click reads").
// So a click reads this struct's first two cache lines and, past them,
// three blocks, each one allocation: rules (a rule's time window, where its
// other conditions are, where its target is; no pointers), conds (the
// language ranges, then each rule's other conditions) and text, which holds
// every string of the routing: the split's targets, the conditions'
// strings, then the rules' targets. The rules as the spec reads them
// (specRule) are only a step of Compile, and of Key.
type Compiled struct {
	// What every click of a routed link reads, first.
	reads       Fact
	forwardPath bool
	nVariants   uint8
	nRanges     uint8 // conds[:nRanges] are the language ranges
	// byDevice[d] holds bit i when rule i may match a client of device
	// class d: it has no devices condition, or one that names d. Evaluate
	// tries only those rules, in order, so a click skips the rules of the
	// other devices without reading them.
	byDevice [numDevices]ruleSet
	// timed are the rules with a time window, localized those with
	// languages: Evaluate reads these conditions for all the rules in the
	// running at once (the language ranges each with the rules that name
	// it), before it tries any rule: each costs less than trying a rule.
	timed, localized ruleSet
	// ends says the split ends at endAt (Unix nanoseconds, by the
	// redirector's clock: spec.variantsEnd), after which its clicks go to
	// split destination endSlot (an index of splitEnd's targets).
	ends    bool
	endSlot uint8
	endAt   int64
	seed    uint64
	rules   []packedRule
	conds   []condition
	text    string
	// splitEnd are where the split's targets (as locate made them) end in
	// text, which begins with them: text[:splitEnd[0]] is spec.url's,
	// text[splitEnd[i]:splitEnd[i+1]] variant i's.
	splitEnd [linkv1.MaxVariants + 1]uint16
	// slots is the destination of each bucket of the split (split.go): a
	// split click reads one byte of it, on a cache line of its own.
	slots slotTable

	// Not read by a click's choice.
	expiredURL string
	// splitURLs are the status.variantUses keys of the split, spec.url
	// first.
	splitURLs []string
}

// packedRule is what a click reads of a rule: its time window, where its
// other conditions (query, headers, countries) are in Compiled.conds, and
// its target in Compiled.text.
type packedRule struct {
	after, before int64 // Unix nanoseconds; hasAfter, hasBefore say whether set
	// url is the target: text[urlAt:urlAt+urlLen].
	urlAt  uint32
	urlLen uint16
	// The other conditions are conds[first:end]: counted from first, the
	// countries condition if any before queryAt, the query's before
	// headersAt, then the headers'.
	first, end          uint16
	queryAt, headersAt  uint8
	hasAfter, hasBefore bool
}

// span is where a condition's strings are in text while Compile writes it.
type span struct{ at, nameLen, valueLen int }

// condition is one condition of a rule (countries: the upper-case codes
// as the name, two bytes each; a query parameter; a header), or a language
// range (the name). Its strings are substrings of Compiled.text, so that
// those of a link's conditions sit together.
type condition struct {
	match
	// rules are, for a language range, the rules that name it.
	rules ruleSet
}

// ruleSet is a set of a link's rules, bit i for spec.rules[i].
type ruleSet uint16

// A ruleSet holds every rule a link may have.
var _ = [1]struct{}{}[linkv1.MaxRules/17]

// Fact is a fact of a request that a link's routing reads, so that the
// redirector gathers only those (a header lookup or a clock read is a
// good part of a plain redirect).
type Fact uint8

const (
	FactDevice   Fact = 1 << iota // Facts.Device or UserAgent: a devices condition
	FactLanguage                  // Facts.AcceptLanguage: a languages condition
	FactTime                      // Facts.Now: an after or before condition
	FactCountry                   // Facts.Country: a countries condition
	FactClient                    // Facts.Client and UserAgent: the split
)

// specRule is a rule as the spec reads it, checked and normalized: what
// Compile packs and Key writes.
type specRule struct {
	url       string
	devices   uint8 // bit 1<<Device; 0: no condition
	languages []string
	query     []match
	headers   []match // the names canonical; hasValue unused
	after     int64   // Unix nanoseconds; hasAfter says whether set
	before    int64
	hasAfter  bool
	hasBefore bool
	countries []string
}

// match is a name and a value a query parameter (that must have the value
// if hasValue) or a header must have.
type match struct {
	name, value string
	hasValue    bool
}

// Compile prepares a link's routing for Evaluate, once per spec, its
// split's buckets assigned without an assignment before (CompileAssigned).
func Compile(spec *linkv1.ShortLinkSpec, seed string, locate func(string) string) (*Compiled, error) {
	return CompileAssigned(spec, nil, seed, locate)
}

// CompileAssigned prepares a link's routing for Evaluate, once per spec,
// its split by the assignment buckets (status.splitBuckets: Assign's, as
// the controller wrote it for this spec; Assign is applied again, so an
// assignment of another spec or none reads as the controller would make
// it). seed makes the variant split differ between links (so that one
// client is not in the first variant of every link): the link's
// namespace/name, the same on every replica. locate turns a target as
// written into what Choice.URL holds (the redirector's Location form); nil
// trims spaces. It refuses what the CRD refuses, for a spec that reached
// it another way.
func CompileAssigned(spec *linkv1.ShortLinkSpec, buckets []linkv1.SplitBuckets, seed string, locate func(string) string) (*Compiled, error) {
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
		seed:        hashString(fnvOffset, seed),
		forwardPath: spec.ForwardPath,
		nVariants:   uint8(len(spec.Variants)),
	}
	if spec.ExpiredURL != "" {
		c.expiredURL = locate(string(spec.ExpiredURL))
	}
	rules := make([]specRule, len(spec.Rules))
	for i := range spec.Rules {
		r, err := compileRule(&spec.Rules[i], locate)
		if err != nil {
			return nil, fmt.Errorf("spec.rules[%d]: %w", i, err)
		}
		rules[i] = r
	}
	var total int32
	for i, v := range spec.Variants {
		if v.Weight < 1 || v.Weight > 100 {
			return nil, fmt.Errorf("spec.variants[%d].weight is %d: use a percentage from 1 to 100", i, v.Weight)
		}
		total += v.Weight
	}
	if total > 100 {
		return nil, fmt.Errorf("the weights of spec.variants add up to %d: they are percentages, spec.url takes what they leave of 100", total)
	}
	c.slots = newSlotTable(assign(spec.Variants, buckets))
	if end := spec.VariantsEnd; end != nil {
		slot, err := endSlot(spec)
		if err != nil {
			return nil, err
		}
		c.ends, c.endSlot, c.endAt = true, slot, end.At.UnixNano()
		c.reads |= FactTime
	}
	split := make([]string, 0, 1+len(spec.Variants))
	split = append(split, locate(spec.URL))
	for _, v := range spec.Variants {
		split = append(split, locate(string(v.URL)))
	}
	if err := c.pack(rules, split); err != nil {
		return nil, err
	}
	if len(spec.Variants) > 0 {
		c.reads |= FactClient
		c.splitURLs = make([]string, 0, 1+len(spec.Variants))
		c.splitURLs = append(c.splitURLs, spec.URL)
		for _, v := range spec.Variants {
			c.splitURLs = append(c.splitURLs, string(v.URL))
		}
	}
	return c, nil
}

// pack lays the rules and the split's targets (spec.url's, then each
// variant's) out as Compiled says: the rule sets, the rules, the
// conditions (the language ranges, each once, first) and one text for all
// their strings.
func (c *Compiled) pack(rules []specRule, split []string) error {
	var text strings.Builder
	for i, t := range split {
		text.WriteString(t)
		if text.Len() > math.MaxUint16 {
			return fmt.Errorf("spec.url and spec.variants' urls are too long")
		}
		c.splitEnd[i] = uint16(text.Len())
	}
	// The conditions, their strings at[i] in text until it is written.
	var conds []condition
	var at []span
	add := func(name, value string, hasValue bool, rules ruleSet) {
		conds = append(conds, condition{match: match{hasValue: hasValue}, rules: rules})
		at = append(at, span{at: text.Len(), nameLen: len(name), valueLen: len(value)})
		text.WriteString(name)
		text.WriteString(value)
	}
	for i := range rules {
		r := &rules[i]
		c.reads |= r.reads()
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
			for j := range conds {
				if text.String()[at[j].at:at[j].at+at[j].nameLen] == l {
					conds[j].rules |= 1 << i
					continue rangesOfRule
				}
			}
			add(l, "", false, 1<<i)
		}
	}
	if len(conds) > math.MaxUint8 {
		return fmt.Errorf("the rules name %d language ranges, more than %d", len(conds), math.MaxUint8)
	}
	c.nRanges = uint8(len(conds))
	c.rules = make([]packedRule, len(rules))
	for i := range rules {
		r, p := &rules[i], &c.rules[i]
		p.after, p.hasAfter, p.before, p.hasBefore = r.after, r.hasAfter, r.before, r.hasBefore
		if len(r.query)+len(r.headers) >= math.MaxUint8 {
			return fmt.Errorf("spec.rules[%d] has %d query and header conditions, more than %d", i, len(r.query)+len(r.headers), math.MaxUint8-1)
		}
		p.first = uint16(len(conds))
		if len(r.countries) > 0 {
			add(strings.Join(r.countries, ""), "", false, 0)
		}
		p.queryAt = uint8(len(conds) - int(p.first))
		for _, q := range r.query {
			add(q.name, q.value, q.hasValue, 0)
		}
		p.headersAt = uint8(len(conds) - int(p.first))
		for _, h := range r.headers {
			add(h.name, h.value, false, 0)
		}
		if len(conds) > math.MaxUint16 {
			return fmt.Errorf("the rules have more than %d conditions", math.MaxUint16)
		}
		p.end = uint16(len(conds))
	}
	for i := range rules {
		url := rules[i].url
		if len(url) > math.MaxUint16 || text.Len() > math.MaxUint32 {
			return fmt.Errorf("spec.rules[%d].url is too long", i)
		}
		c.rules[i].urlAt, c.rules[i].urlLen = uint32(text.Len()), uint16(len(url))
		text.WriteString(url)
	}
	// Copies without spare capacity: their size is their memory.
	c.text = strings.Clone(text.String())
	c.conds = slices.Clone(conds)
	for i, a := range at {
		name := a.at + a.nameLen
		c.conds[i].name, c.conds[i].value = c.text[a.at:name], c.text[name:name+a.valueLen]
	}
	return nil
}

func compileRule(r *linkv1.RedirectRule, locate func(string) string) (specRule, error) {
	out := specRule{url: locate(string(r.URL))}
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
		m := match{name: q.Name}
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
		out.headers = append(out.headers, match{name: textproto.CanonicalMIMEHeaderKey(h.Name), value: h.Value})
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
func (r *specRule) reads() Fact {
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
func (c *Compiled) Plain() bool { return len(c.rules) == 0 && c.nVariants == 0 }

// Rules and Variants are how many the link has.
func (c *Compiled) Rules() int    { return len(c.rules) }
func (c *Compiled) Variants() int { return int(c.nVariants) }

// ExpiredURL is where a finished link sends clicks (as locate made it), or
// "" to answer as before (410 Gone or the namespace's fallback).
func (c *Compiled) ExpiredURL() string { return c.expiredURL }

// VariantsEnd is spec.variantsEnd: the instant the split ends and the
// target (as the redirect sends it) its clicks go to from then on.
func (c *Compiled) VariantsEnd() (at time.Time, url string, ok bool) {
	if !c.ends {
		return time.Time{}, "", false
	}
	return time.Unix(0, c.endAt), c.splitTarget(c.endSlot), true
}

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
			r := &c.rules[i]
			return Choice{URL: c.text[r.urlAt : r.urlAt+uint32(r.urlLen)], Rule: i, Variant: -1}
		}
	}
	if c.nVariants > 0 {
		if c.ends && f.Now.UnixNano() >= c.endAt {
			return Choice{URL: c.splitTarget(c.endSlot), Rule: -1, Variant: -1, Ended: true}
		}
		sum := f.AgentSum
		if !f.AgentSumKnown {
			sum = AgentSum(f.UserAgent)
		}
		if slot := c.slots.slot(bucket(c.seed, f.Client, sum)); slot > 0 {
			return Choice{URL: c.splitTarget(slot), Rule: -1, Variant: int(slot) - 1}
		}
	}
	return Choice{URL: c.text[:c.splitEnd[0]], Rule: -1, Variant: -1}
}

// splitTarget is the split's target of slot (0: spec.url, i+1: variant i).
func (c *Compiled) splitTarget(slot uint8) string {
	if slot == 0 {
		return c.text[:c.splitEnd[0]]
	}
	return c.text[c.splitEnd[slot-1]:c.splitEnd[slot]]
}

// endSlot is the split's slot of spec.variantsEnd.url: 0 for spec.url,
// i+1 for variant i, compared as written (trimmed).
func endSlot(spec *linkv1.ShortLinkSpec) (uint8, error) {
	if len(spec.Variants) == 0 {
		return 0, fmt.Errorf("spec.variantsEnd ends the split of spec.variants: set variants, or remove variantsEnd")
	}
	url := strings.TrimSpace(spec.VariantsEnd.URL)
	if url == strings.TrimSpace(spec.URL) {
		return 0, nil
	}
	for i, v := range spec.Variants {
		if url == strings.TrimSpace(string(v.URL)) {
			return uint8(i + 1), nil
		}
	}
	return 0, fmt.Errorf("spec.variantsEnd.url %q is neither spec.url nor the url of one of spec.variants: name the destination that wins the test as written there", spec.VariantsEnd.URL)
}

// firstMatch is the index of the first rule whose conditions hold, or -1.
// The rules that may match are those of the client's device class
// (byDevice), less those whose time window is closed and those whose
// languages the client does not accept, each read once for all the rules
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
			if r := &c.rules[bits.TrailingZeros16(uint16(set))]; r.hasAfter && now < r.after || r.hasBefore && now >= r.before {
				running &^= set & -set
			}
		}
	}
	if set := running & c.localized; set != 0 {
		running &^= set &^ c.acceptedRanges(f.AcceptLanguage)
	}
	for ; running != 0; running &= running - 1 {
		if i := bits.TrailingZeros16(uint16(running)); c.othersHold(&c.rules[i], f) {
			return i
		}
	}
	return -1
}

// acceptedRanges are the rules one of whose language ranges matches an
// entry of the Accept-Language header that the client accepts (language.go),
// each range checked once for all the rules that name it.
func (c *Compiled) acceptedRanges(header []byte) ruleSet {
	floor := acceptFloor(header)
	if floor <= 0 {
		return 0
	}
	var held ruleSet
	ranges := c.conds[:c.nRanges]
	for len(header) > 0 {
		var tag []byte
		var q int
		if tag, q, header = nextLanguage(header); q < floor {
			continue
		}
		for i := range ranges {
			if matchesRange(tag, ranges[i].name) {
				held |= ranges[i].rules
			}
		}
	}
	return held
}

// othersHold reports whether the rule's conditions that firstMatch does
// not read for all the rules at once hold, the cheap ones first: the
// country, the query, the headers.
func (c *Compiled) othersHold(r *packedRule, f *Facts) bool {
	others := c.conds[r.first:r.end]
	for i := range others {
		cd := &others[i]
		switch {
		case i < int(r.queryAt):
			if !matchesCountry(f.Country, cd.name) {
				return false
			}
		case i < int(r.headersAt):
			if !queryHolds(f.RawQuery, &cd.match) {
				return false
			}
		default:
			if f.Headers == nil || string(f.Headers.Peek(cd.name)) != cd.value {
				return false
			}
		}
	}
	return true
}

// matchesCountry reports whether country (spaces around it ignored, any
// ASCII case) is one of the upper-case codes, two bytes each.
func matchesCountry(country []byte, codes string) bool {
	country = trimSpace(country)
	if len(country) != 2 {
		return false
	}
	a, b := upperASCII(country[0]), upperASCII(country[1])
	for i := 0; i+1 < len(codes); i += 2 {
		if codes[i] == a && codes[i+1] == b {
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
