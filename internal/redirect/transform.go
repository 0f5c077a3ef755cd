package redirect

import (
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/claim"
	"github.com/linkforge/linkforge/internal/events"
	"github.com/linkforge/linkforge/internal/intern"
	"github.com/linkforge/linkforge/internal/location"
	"github.com/linkforge/linkforge/internal/rules"
	"github.com/linkforge/linkforge/internal/uses"
)

// DomainAnnotation on a Namespace names a host whose requests /<code> are
// served from that namespace, beside /<namespace>/<code> on any host.
const DomainAnnotation = claim.DomainAnnotation

// Link is what the redirector's informer cache holds for a ShortLink: the
// informer transform (TransformShortLink) turns each ShortLink into one, and
// the index points at the same object, so a link costs one small struct plus
// its strings, not a ShortLink (whose ObjectMeta alone is 256 bytes of mostly
// empty fields) plus a separate index entry.
//
// It keeps exactly what the redirector reads, computed once per object
// version with the API helpers (ServesConfirmedCode, HoldsConfirmedCode,
// Expiry, Finished, RedirectStatusCode), which read the status fields the
// controller writes for machines (confirmedGeneration, finishedAt, uses),
// never condition reasons: the key fields, the Location header, and the flags
// of the answer. Everything else of the ShortLink (managedFields, labels,
// annotations, uid, conditions and their messages, canonicalURL, shortURL,
// ...) is dropped.
//
// A Link is immutable once built. Because the cache holds Links, not
// ShortLinks, the manager's cached client cannot read ShortLinks in the
// redirector; it has no need to.
type Link struct {
	Namespace       string // interned
	Name            string
	UID             string // metadata.uid, for click events: the decoded object's string, not a copy
	ResourceVersion string // the informer tells resyncs from updates by it
	Code            string // status.code; served only if Confirmed()
	Location        string // spec.url trimmed, made a valid URI (see Location)

	until      int64         // expiry (Unix ns) if flagExpires; end of a tombstone
	statusUses int64         // status.uses of this version: the base of the next count write
	more       *linkMore     // what few links have: their limit, routing, activation (nil: none)
	counter    *uses.Counter // this replica's uses of the link, shared by its versions (set by the informer handler)
	created    uint32        // creationTimestamp in Unix seconds (the API's precision): precedence
	lastUsed   uint32        // status.lastUsedAt in Unix seconds (0: never): a count write never moves it back
	peer       peerID        // the holder of the reservation forwarded to (forwardTo)
	status     uint8         // redirect status - 300: 1, 2, 7 or 8
	flags      uint16
	// 144 bytes in all, the 144-byte allocation size class (TestPerLinkSizes):
	// it was 112 until activates, 144 with lastUsed and peer, and 160 with
	// the UID of click events, until activates moved to linkMore and the
	// uid's hash (uses.UIDKey) was computed where it is read instead of
	// kept. Every link pays for every field, 16 bytes a class: what few
	// links have, and the hit path reads only for them, lives in more.
}

// linkMore is what a Link keeps of the fields few links set: a limit, and
// routing (spec.rules, variants, expiredURL, forwardPath). A plain link
// has none, so it pays no memory and no instruction for them.
type linkMore struct {
	maxUses int64 // spec.maxUses (0: unlimited): a lowered limit stops this replica's quota
	// previewerFetches is status.previewerFetches: the base of a count write.
	previewerFetches int64
	activates        int64 // spec.activatesAt (Unix ns) if flagActivates
	// variantUses is the link's status.variantUses (the base of a count
	// write), describe its routing in words, for the preview page (in
	// routedMore), and routing its routing compiled (flagRouted): last,
	// so that with routedMore the routing follows it in memory.
	variantUses []linkv1.VariantUses
	describe    *[]string
	// card is spec.card (flagCard), with its page once rendered.
	card *linkCard
	// access is spec.access: the link is gated (gate.go).
	access  *linkAccess
	routing *rules.Compiled
	// 80 bytes, the 80-byte class: the next field costs 16 bytes a link.
}

// routedMore is a routed link's linkMore and its compiled routing in one
// allocation, the routing right after more.routing: a click on a link with
// rules reads the one, then the other, and among many links each cache
// line of them is a trip to memory (docs/performance.md, "Cache lines a
// click reads"). With the routing in linkMore itself, the links with only
// spec.maxUses would carry its size for nothing.
type routedMore struct {
	linkMore
	compiled rules.Compiled
	describe []string
}

// routing is the link's compiled routing, or nil (also for no link).
func (l *Link) routing() *rules.Compiled {
	if l == nil || l.flags&flagRouted == 0 {
		return nil
	}
	return l.more.routing
}

// card is the link's spec.card, or nil.
func (l *Link) card() *linkCard {
	if l.flags&flagCard == 0 {
		return nil
	}
	return l.more.card
}

// maxUsesLimit is spec.maxUses, or 0.
func (l *Link) maxUsesLimit() int64 {
	if l.more == nil {
		return 0
	}
	return l.more.maxUses
}

// UsesVersion is what counting needs of this version (uses.Versioned).
func (l *Link) UsesVersion() uses.LinkVersion {
	v := uses.LinkVersion{
		Namespace: l.Namespace, Name: l.Name, ResourceVersion: l.ResourceVersion,
		UID: uses.UIDKey(types.UID(l.UID)), StatusUses: l.statusUses, MaxUses: l.maxUsesLimit(), StatusLastUsed: int64(l.lastUsed),
		NoReservations: !l.is(flagReserved), IdleTimeout: l.is(flagIdleTimeout),
		Code: l.Code, Peer: l.peer.holder(), ReturnRequested: l.is(flagReturnRequested), Created: int64(l.created),
	}
	if l.more != nil {
		v.VariantUses, v.StatusPreviewerFetches = l.more.variantUses, l.more.previewerFetches
		if c := l.routing(); c != nil {
			v.SplitURLs = c.SplitURLs()
		}
	}
	return v
}

const (
	flagConfirmed       uint16 = 1 << iota // ServesConfirmedCode: the link answers under Code
	flagExpires                            // until is the link's expiry
	flagFinished                           // status.finishedAt is set, or all maxUses are used
	flagForwardQuery                       // append the request's query string
	flagHasQuery                           // Location has a query before its fragment
	flagMaxUses                            // the link counts uses: never cacheable
	flagTombstone                          // a deleted finished link: 410 until `until`
	flagSpecAhead                          // held a confirmed code, but its spec changed since: not yet checked by the controller
	flagActivates                          // activates is when the link starts redirecting; before, it answers as unknown
	flagReserved                           // status.useReservations is not empty
	flagIdleTimeout                        // spec.idleTimeout is set: its uses are written every round
	flagReturnRequested                    // a reservation is marked returnRequested
	flagRouted                             // more.routing is set: rules, variants, expiredURL or forwardPath
	flagEventPlain                         // Namespace, Name, UID and Code are events.Plain: click events write them without a look
	flagPlainLocation                      // Location is events.Plain
	flagCard                               // more.card is set: previewers get the card, not a redirect
)

func (l *Link) is(f uint16) bool { return l.flags&f != 0 }

// Confirmed reports whether the controller confirmed the link's hold on Code
// for its current spec.
func (l *Link) Confirmed() bool { return l.is(flagConfirmed) }

// indexed reports whether an earlier version of the link may be in the index
// under Code: it is confirmed, or it was and its spec has changed since.
func (l *Link) indexed() bool { return l.is(flagConfirmed | flagSpecAhead) }

// Created is the link's creation timestamp.
func (l *Link) Created() time.Time { return time.Unix(int64(l.created), 0) }

// Status is the HTTP status of the link's redirects.
func (l *Link) Status() int { return 300 + int(l.status) }

// Gone reports whether the link answers 410 at now.
func (l *Link) Gone(now time.Time) bool { return l.gone(now.UnixNano()) }

func (l *Link) gone(now int64) bool {
	return l.flags&flagFinished != 0 || l.flags&flagExpires != 0 && now >= l.until
}

// answersNow reports whether the link redirects at now (Unix ns): active,
// not deleted, not finished or expired.
func (l *Link) answersNow(now int64) bool {
	return !l.waiting(now) && !l.is(flagTombstone) && !l.gone(now)
}

// waiting reports whether the link has not activated yet at now (Unix ns).
func (l *Link) waiting(now int64) bool {
	return l.flags&flagActivates != 0 && now < l.more.activates
}

// target is the Location of a redirect for a request with the given raw query.
func (l *Link) target(rawQuery string) string {
	if l.flags&flagForwardQuery == 0 || rawQuery == "" {
		return l.Location
	}
	return location.WithQuery(l.Location, strings.IndexByte(l.Location, '#'), l.flags&flagHasQuery != 0, rawQuery)
}

func (l *Link) claim() claim.Link {
	return claim.Link{Name: l.Name, Created: l.Created(), Confirmed: l.Confirmed()}
}

// GetObjectKind, DeepCopyObject and GetObjectMeta let the informer store and
// its namespace index key a Link like any object.
func (l *Link) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject returns a copy (a Link holds no mutable references).
func (l *Link) DeepCopyObject() runtime.Object { c := *l; return &c }

// GetObjectMeta returns the metadata the informer reads: namespace, name,
// resourceVersion and creationTimestamp.
func (l *Link) GetObjectMeta() metav1.Object {
	return &metav1.ObjectMeta{
		Namespace: l.Namespace, Name: l.Name, ResourceVersion: l.ResourceVersion,
		CreationTimestamp: metav1.NewTime(l.Created()),
	}
}

var _ metav1.ObjectMetaAccessor = (*Link)(nil)

// NewLink builds the Link of a ShortLink.
func NewLink(in *linkv1.ShortLink) *Link {
	l := &Link{
		Namespace:       intern.String(in.Namespace),
		Name:            in.Name,
		UID:             string(in.UID),
		ResourceVersion: in.ResourceVersion,
		Code:            in.Status.Code,
		statusUses:      in.Status.Uses,
		created:         uint32(max(in.CreationTimestamp.Unix(), 0)),
	}
	if in.Status.LastUsedAt != nil {
		l.lastUsed = uint32(max(in.Status.LastUsedAt.Unix(), 0))
	}
	switch st := in.RedirectStatusCode(); st {
	case 301, 302, 307, 308:
		l.status = uint8(st - 300)
	default: // not admitted by the CRD; redirect anyway
		l.status = 2
	}
	switch {
	case in.ServesConfirmedCode():
		l.flags |= flagConfirmed
		// Only a served link needs its Location.
		l.Location = Location(in.Spec.URL)
	case in.HoldsConfirmedCode():
		// The spec changed and the controller has not checked it yet (its URL
		// may not even canonicalize): the index keeps serving the version it
		// last confirmed.
		l.flags |= flagSpecAhead
	}
	if at, ok := in.Expiry(); ok {
		l.flags |= flagExpires
		l.until = at.UnixNano()
	}
	if in.Finished() {
		l.flags |= flagFinished
	}
	if in.Spec.MaxUses != nil {
		l.flags |= flagMaxUses
		l.more = &linkMore{maxUses: *in.Spec.MaxUses}
	}
	if at, ok := in.Activation(); ok {
		l.flags |= flagActivates
		l.extra().activates = at.UnixNano()
	}
	if l.Confirmed() && hasRouting(&in.Spec) {
		// Compiled once per version, here, never per request. The
		// controller confirmed this spec, so it compiles; if it did not
		// (a spec that reached the API another way), the link serves its
		// spec.url, as it did before it had routing.
		if c, err := rules.CompileAssigned(&in.Spec, in.Status.SplitBuckets, in.Namespace+"/"+in.Name, Location); err == nil {
			m := &routedMore{compiled: *c}
			if l.more != nil {
				m.linkMore = *l.more
			}
			m.routing, m.describe = &m.compiled, rules.Describe(&in.Spec)
			m.linkMore.describe = &m.describe
			l.more, l.flags = &m.linkMore, l.flags|flagRouted
		}
	}
	if len(in.Status.VariantUses) > 0 {
		l.extra().variantUses = in.Status.VariantUses
	}
	if l.Confirmed() && in.Spec.Card != nil {
		l.extra().card, l.flags = newLinkCard(in.Spec.Card), l.flags|flagCard
	}
	if l.Confirmed() && in.Spec.Access != nil {
		if l.more == nil {
			l.more = &linkMore{}
		}
		l.more.access = newLinkAccess(in.Spec.Access)
	}
	if in.Status.PreviewerFetches > 0 {
		// Here, not in Link: a link previewers never fetched pays nothing.
		l.extra().previewerFetches = in.Status.PreviewerFetches
	}
	if len(in.Status.UseReservations) > 0 {
		l.flags |= flagReserved
		l.peer = peers.id(forwardTo(in.Status.UseReservations))
		if slices.ContainsFunc(in.Status.UseReservations, func(r linkv1.UseReservation) bool { return r.ReturnRequested }) {
			l.flags |= flagReturnRequested
		}
	}
	if in.Spec.IdleTimeout != nil {
		l.flags |= flagIdleTimeout
	}
	// Checked here, once per version, not by the click events' encoder
	// per click (Record.LinkPlain, TargetPlain).
	if events.Plain(l.Namespace) && events.Plain(l.Name) && events.Plain(l.UID) && events.Plain(l.Code) {
		l.flags |= flagEventPlain
	}
	if events.Plain(l.Location) {
		l.flags |= flagPlainLocation
	}
	if in.Spec.ForwardQuery {
		l.flags |= flagForwardQuery
		beforeFrag, _, _ := strings.Cut(l.Location, "#")
		if strings.IndexByte(beforeFrag, '?') >= 0 {
			l.flags |= flagHasQuery
		}
	}
	return l
}

// extra is l.more, made if the link has none yet (NewLink only: a Link is
// immutable once built).
func (l *Link) extra() *linkMore {
	if l.more == nil {
		l.more = &linkMore{}
	}
	return l.more
}

// hasRouting reports whether a spec routes clicks beyond spec.url: only
// such links are compiled (a plain link pays nothing for routing).
func hasRouting(spec *linkv1.ShortLinkSpec) bool {
	return len(spec.Rules) > 0 || len(spec.Variants) > 0 || spec.ExpiredURL != "" || spec.ForwardPath
}

// Transform is the informer transform of the redirector's cache: ShortLinks
// become Links (TransformShortLink), Namespaces are stripped
// (TransformNamespace), anything else (including a Link, so it is idempotent)
// is left as it is.
func Transform(obj any) (any, error) {
	switch obj.(type) {
	case *linkv1.ShortLink:
		return TransformShortLink(obj)
	case *corev1.Namespace:
		return TransformNamespace(obj)
	}
	return obj, nil
}

// TransformShortLink turns a ShortLink into the Link the cache keeps; other
// objects pass unchanged. It does not modify its input.
func TransformShortLink(obj any) (any, error) {
	if in, ok := obj.(*linkv1.ShortLink); ok {
		return NewLink(in), nil
	}
	return obj, nil
}

// TransformNamespace is the informer transform of the redirector's Namespace
// cache: name, uid (for events), resourceVersion, creationTimestamp and the
// domain and fallback annotations; nothing else.
func TransformNamespace(obj any) (any, error) {
	in, ok := obj.(*corev1.Namespace)
	if !ok {
		return obj, nil
	}
	out := &corev1.Namespace{
		ObjectMeta: metav1.ObjectMeta{
			Name:              intern.String(in.Name),
			UID:               in.UID,
			ResourceVersion:   in.ResourceVersion,
			CreationTimestamp: in.CreationTimestamp,
		},
	}
	for _, key := range namespaceAnnotations {
		if v, ok := in.Annotations[key]; ok {
			if out.Annotations == nil {
				out.Annotations = map[string]string{}
			}
			out.Annotations[key] = v
		}
	}
	return out, nil
}
