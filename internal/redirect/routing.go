package redirect

import (
	"hash/maphash"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/valyala/fasthttp"

	"github.com/linkforge/linkforge/internal/agent"
	"github.com/linkforge/linkforge/internal/clientaddr"
	"github.com/linkforge/linkforge/internal/location"
	"github.com/linkforge/linkforge/internal/rules"
)

// Routing: where a click on a link with spec.rules, spec.variants,
// spec.expiredURL or spec.forwardPath goes. The link's routing is compiled
// once per version (NewLink); a click gathers the facts it reads from
// fasthttp's own buffers, without copying, and rules.Evaluate chooses.
// A plain link takes none of this path (flagRouted).

// ctxOf is the request the handler serves, which answer was given as
// its clock (ctxClock): a routed link's click reads its facts there.
// Callers of answer without one (its benchmarks) pass other clocks, and
// their clicks carry no headers. (A type assertion to the concrete type:
// one to an interface looks up an itab, a hundred instructions a click.)
func ctxOf(at requestClock) *fasthttp.RequestCtx {
	if c, ok := at.(ctxClock); ok {
		return c.ctx
	}
	return nil
}

// headerAcceptLanguage is read for languages conditions, in canonical
// form: fasthttp stores the names of a request's headers so, and
// PeekCanonical spares the normalization of the name that Peek does on
// every call (a sixth of what a link with rules cost a click).
var headerAcceptLanguage = []byte("Accept-Language")

// canonicalHeaders is a request's headers as rules.Facts.Headers: the
// rules ask for canonical names.
type canonicalHeaders fasthttp.RequestHeader

func (h *canonicalHeaders) Peek(name string) []byte {
	return (*fasthttp.RequestHeader)(h).PeekCanonical(sbytes(name))
}

// clientAddress is the request's client address, the one every reader of
// one uses: the variant split, click events and the access log
// (internal/clientaddr; docs/serving.md, "The client address"). It is
// read at most once per request: routedClick returns what it read, the
// answer carries it, and handle reads it only if the answer has none
// (Redirector.client). The peer, unless it is a trusted proxy
// (Options.TrustedProxies) and the operator names the header it sets:
// then the header's values, read from the right. A chunked request's
// header is not read: fasthttp lists the fields of a trailer section
// after the header's own lines, and a client's trailer would be read
// first.
func (r *Redirector) clientAddress(ctx *fasthttp.RequestCtx) netip.Addr {
	peer := clientaddr.FromSlice(ctx.RemoteIP())
	if r.clientHeader == "" || !r.opts.TrustedProxies.Trusts(peer) {
		return peer
	}
	h := &ctx.Request.Header
	if h.ContentLength() == -1 {
		r.metrics.fromProxies[clientChunked].Inc()
		return peer
	}
	values := h.PeekAll(r.clientHeader)
	a, res := r.opts.TrustedProxies.Client(peer, values)
	r.metrics.fromProxies[res].Inc()
	if res == clientaddr.Invalid {
		r.invalidClientHeader(peer, values)
	}
	return a
}

// clientChunked is fromProxies' index of chunked requests.
const clientChunked = len(clientaddr.Results)

// invalidClientHeader logs, sampled, a trusted proxy's header that holds
// no address where it should.
func (r *Redirector) invalidClientHeader(peer netip.Addr, values [][]byte) {
	unlogged, ok := r.clientHeaderLog.allow(time.Now())
	if !ok {
		return
	}
	var v []byte
	for i, line := range values {
		if i > 0 {
			v = append(v, ", "...)
		}
		v = append(v, line...)
	}
	if len(v) > maxLoggedReason {
		v = append(v[:maxLoggedReason], "..."...)
	}
	r.log.Info("a trusted proxy sent a client-address header that is not a list of addresses: the client is taken to be the last trusted address read (docs/serving.md, \"The client address\")",
		"header", r.clientHeader, "value", strconv.QuoteToASCII(string(v)), "proxy", peer.String(), "unloggedBefore", unlogged)
}

// client is the request's client address, read once (clientAddress): the
// one the answer carries, else read now and kept in it.
func (r *Redirector) client(ctx *fasthttp.RequestCtx, a *answer) netip.Addr {
	if !a.client.IsValid() {
		a.client = r.clientAddress(ctx)
	}
	return a.client
}

// requestTime is the time of a request as answer reads it: the
// redirector's clock if it has one, else the request's (read from its
// RequestCtx directly when there is one, ctx).
func (r *Redirector) requestTime(at requestClock, ctx *fasthttp.RequestCtx) time.Time {
	if r.clock != nil {
		return r.clock.Now()
	}
	if ctx != nil {
		if t := ctx.Time(); !t.IsZero() {
			return t
		}
	}
	return at.Time()
}

// agentMemo remembers what the redirector reads of the User-Agents it has
// seen (their class, agent.Classify, and their rules.AgentSum), by a hash
// of the agent: a keep-alive connection (and most of a site's visitors)
// send the same few agents, and hashing one costs a fraction of reading
// it. The hash is seeded per process, so a client cannot choose agents
// that share a slot's check. A slot is two words, each checked against
// the hash on its own (the first: the hash's high bits and the class; the
// second: the sum and the hash's top 32 bits), so a lookup takes no lock.
// Two agents of one slot whose hashes agree on the bits checked (one pair
// in 2^52) would share a class and sum; a lookup that meets two writers
// of its slot at once finds a word that disagrees with its hash and reads
// the agent.
type agentMemo struct {
	seed  maphash.Seed
	slots [agentMemoSlots][2]atomic.Uint64
}

const (
	agentMemoSlots = 4096
	agentBits      = 1<<agent.Bits - 1 // the low bits of a slot's first word: the class
)

func newAgentMemo() *agentMemo { return &agentMemo{seed: maphash.MakeSeed()} }

// empty is what an absent User-Agent reads as.
var emptyAgent, emptyAgentSum = agent.Classify(nil), rules.AgentSum(nil)

// connAgentMax is the longest User-Agent a connection remembers (agentOf):
// longer ones, rare, are looked up in the agentMemo every time.
const connAgentMax = 256

// connAgent is the User-Agent a connection's last request sent, and its
// class and sum (agentOf). Owned by the goroutine serving the connection.
type connAgent struct {
	ua    []byte
	agent agent.Agent
	sum   uint32
	known bool
}

// agentOf is the class and the sum of userAgent, the User-Agent of ctx's
// request: a keep-alive connection sends the same agent with every request,
// so the connection remembers the last it sent, compared byte for byte
// (a few instructions, where the agentMemo hashes the agent and reads its
// slot); a new agent is looked up in the agentMemo.
func (r *Redirector) agentOf(ctx *fasthttp.RequestCtx, userAgent []byte) (agent.Agent, uint32) {
	c, ok := ctx.Conn().(*timedConn)
	if !ok {
		return r.agents.lookup(userAgent)
	}
	m := &c.agent
	if m.known && string(m.ua) == string(userAgent) {
		return m.agent, m.sum
	}
	a, sum := r.agents.lookup(userAgent)
	if len(userAgent) <= connAgentMax {
		m.ua = append(m.ua[:0], userAgent...)
		m.agent, m.sum, m.known = a, sum, true
	}
	return a, sum
}

// lookup is the class and the sum of userAgent.
func (m *agentMemo) lookup(userAgent []byte) (agent.Agent, uint32) {
	if len(userAgent) == 0 {
		return emptyAgent, emptyAgentSum
	}
	h := maphash.Bytes(m.seed, userAgent)
	slot := &m.slots[h%agentMemoSlots]
	if v := slot[0].Load(); v&^agentBits == h&^agentBits && v != 0 {
		if w := slot[1].Load(); uint32(w) == uint32(h>>32) {
			return agent.Agent(v & agentBits), uint32(w >> 32)
		}
	}
	a, sum := agent.Classify(userAgent), rules.AgentSum(userAgent)
	slot[1].Store(uint64(sum)<<32 | h>>32)
	slot[0].Store(h&^agentBits | uint64(a))
	return a, sum
}

// routedClick is where a click on routed link e goes: its Location, the
// target it chose without the query it may forward (the click event's),
// the index of its destination in the split (rules.SplitSlot) if it went
// through the split, else -1, the rule or variant that chose it, and the
// client's address if the routing read it (else the zero Addr). ok is
// routedNoLink for a forwarded path that names no link after all
// (forwardedRest), routedBadPath for one encoded too many times over
// (rules.AppendPath).
// A previewer's click never goes through the split: the variant it would
// get is replaced by spec.url, so that status.variantUses counts people.
func (r *Redirector) routedClick(e *Link, rt route, rawQuery string, at requestClock, now int64, previewer bool) (loc, target string, slot int, chosen choice, client netip.Addr, ok routed) {
	c := e.more.routing
	ch := rules.Choice{URL: e.Location, Rule: -1, Variant: -1}
	if !c.Plain() {
		// The facts c's rules read of the request (rules.Compiled.Reads),
		// gathered here, into a Facts of this frame: filled in by another
		// function through a pointer, each store went through the write
		// barrier's check.
		var f rules.Facts
		f.RawQuery = sbytes(rawQuery)
		reads := c.Reads()
		ctx := ctxOf(at)
		if reads&rules.FactTime != 0 {
			if now != 0 {
				f.Now = time.Unix(0, now)
			} else {
				f.Now = r.requestTime(at, ctx)
			}
		}
		if ctx != nil {
			h := &ctx.Request.Header
			f.Headers = (*canonicalHeaders)(h)
			if reads&(rules.FactDevice|rules.FactClient) != 0 {
				f.UserAgent = h.UserAgent()
				a, sum := r.agentOf(ctx, f.UserAgent)
				f.Device, f.AgentSum = rules.DeviceOf(a), sum
				f.DeviceKnown, f.AgentSumKnown = true, true
			}
			if reads&rules.FactLanguage != 0 {
				f.AcceptLanguage = h.PeekCanonical(headerAcceptLanguage)
			}
			if reads&rules.FactCountry != 0 && r.opts.CountryHeader != "" {
				f.Country = h.PeekCanonical(sbytes(r.countryHeader))
			}
			if reads&rules.FactClient != 0 {
				client = r.clientAddress(ctx)
				f.Client = client
			}
		}
		ch = rules.Evaluate(&f, c)
		if previewer && c.Split(ch) {
			ch = c.Unsplit()
		}
	}
	target = ch.URL
	if rt.forward {
		if target, ok = forwardedTarget(ch.URL, rt, at); ok != routedOK {
			return "", "", -1, choice{}, client, ok
		}
	}
	loc = target
	if e.is(flagForwardQuery) && rawQuery != "" {
		loc = forwardQuery(target, rawQuery)
	}
	chosen = choice{rule: uint8(ch.Rule + 1), variant: uint8(ch.Variant + 1)}
	if c.Split(ch) && !previewer {
		return loc, target, rules.SplitSlot(ch), chosen, client, routedOK
	}
	return loc, target, -1, chosen, client, routedOK
}

// routed is whether a routed click has a target.
type routed uint8

const (
	routedOK      routed = iota
	routedNoLink         // a forwarded path that names no link after all: 404
	routedBadPath        // a forwarded path encoded too many times over: 400
)

// respBadPath answers a forwarded path that rules.AppendPath refuses.
var respBadPath = newCanned(http.StatusBadRequest, "400 Bad Request: the path after the short link's code is percent-encoded more than 4 times over\n")

// unrouted answers a click whose routing found no target (ok of
// routedClick), with the client address it read.
func (r *Redirector) unrouted(rt route, ok routed, client netip.Addr) answer {
	a := answer{resp: respBadPath, cacheControl: ccNoStore}
	if ok != routedBadPath {
		a = clickOf(r.notFound(rt), rt, nil) // the path names no link after all
	}
	a.client = client
	return a
}

// forwardedTarget is target with the path after the code appended
// (spec.forwardPath), or why there is none.
func forwardedTarget(target string, rt route, at requestClock) (string, routed) {
	rest, ok := forwardedRest(at, rt)
	if !ok {
		return "", routedNoLink
	}
	b, ok := rules.AppendPath(make([]byte, 0, len(target)+2*len(rest)+8), target, sbytes(rest))
	if !ok {
		return "", routedBadPath
	}
	return string(b), routedOK
}

// forwardQuery is target with the request's query added (spec.forwardQuery).
func forwardQuery(target, rawQuery string) string {
	frag := strings.IndexByte(target, '#')
	beforeFrag := target
	if frag >= 0 {
		beforeFrag = target[:frag]
	}
	return location.WithQuery(target, frag, strings.IndexByte(beforeFrag, '?') >= 0, rawQuery)
}

// splitClicked counts a GET sent to slot of its link's split (none if
// slot is -1) in the metric.
func (r *Redirector) splitClicked(slot int, method string) {
	if slot >= 0 && method == methodGet {
		r.metrics.split[slot].Inc()
	}
}

// forwardRoute names the link of a path with more after its code
// (/<namespace>/<code>/rest, or /<code>/rest on a namespace's host) when
// that link forwards paths (spec.forwardPath): asked only when the path
// names no link as it is, so /qr and + keep their meaning and plain links
// pay nothing.
func (r *Redirector) forwardRoute(host, path string) (route, *Link) {
	if len(path) < 2 || path[0] != '/' {
		return route{}, nil
	}
	p := path[1:]
	i := strings.IndexByte(p, '/')
	if i <= 0 {
		return route{}, nil
	}
	if j := strings.IndexByte(p[i+1:], '/'); j > 0 {
		ns, code := p[:i], p[i+1:i+1+j]
		if e := r.index.Lookup(ns, code); forwardsPath(e) {
			return route{ns: ns, code: code, ok: true, forward: true}, e
		}
	}
	if ns, ok := r.domains.Lookup(host); ok {
		if e := r.index.Lookup(ns, p[:i]); forwardsPath(e) {
			return route{ns: ns, code: p[:i], ok: true, vanity: true, forward: true}, e
		}
	}
	return route{}, nil
}

func forwardsPath(e *Link) bool {
	c := e.routing()
	return c != nil && c.ForwardPath()
}

// forwardedRest is what follows the code in the request's own target,
// still percent-encoded as the client sent it (rules.AppendPath keeps
// its encodings and resolves its dot segments); ok is false when the
// target's first segments do not spell rt's namespace and code (an
// encoded '/' in them), which then names no link.
func forwardedRest(at requestClock, rt route) (string, bool) {
	ctx := ctxOf(at)
	if ctx == nil {
		return "", false
	}
	raw := bstr(ctx.Request.Header.RequestURI())
	if q := strings.IndexByte(raw, '?'); q >= 0 {
		raw = raw[:q]
	}
	if !strings.HasPrefix(raw, "/") { // absolute form: scheme://authority/path
		if k := strings.Index(raw, "://"); k >= 0 {
			raw = raw[k+3:]
			if s := strings.IndexByte(raw, '/'); s >= 0 {
				raw = raw[s:]
			} else {
				raw = "/"
			}
		}
	}
	want := "/" + rt.code
	segments := 1
	if !rt.vanity {
		want, segments = "/"+rt.ns+want, 2
	}
	end := 0
	for range segments {
		s := strings.IndexByte(raw[end+1:], '/')
		if s < 0 {
			return "", false
		}
		end += 1 + s
	}
	if prefix := raw[:end]; prefix != want {
		if dec, err := url.PathUnescape(prefix); err != nil || dec != want {
			return "", false
		}
	}
	return raw[end:], true
}

// splitLabels label linkforge_redirector_split_clicks_total: a variant's
// index (0-9, MaxVariants at most) or "default" (spec.url's share): bounded,
// whatever the links' URLs.
func splitLabel(slot int) string {
	if slot == 0 {
		return "default"
	}
	return string(rune('0' + slot - 1))
}

func newSplitMetric(reg prometheus.Registerer) (out [splitMetricSlots]prometheus.Counter) {
	v := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: metricsNamespace,
		Subsystem: metricsSubsystem,
		Name:      "split_clicks_total",
		Help:      "Redirects of links with variants that no rule matched, by destination: the variant's index in spec.variants (0-9), or default for spec.url's share. Counted for GET, as uses are.",
	}, []string{"variant"})
	for i := range out {
		out[i] = v.WithLabelValues(splitLabel(i))
	}
	if reg != nil {
		reg.MustRegister(v)
	}
	return out
}
