package uses

import (
	"hash/fnv"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

// LinkVersion is what counting needs of one version of a link, as the
// informer showed it.
type LinkVersion struct {
	Namespace, Name, ResourceVersion string
	// UID is UIDKey of the object's uid: a link deleted and created again
	// under its name is another link, with a counter of its own.
	UID uint64
	// StatusUses is status.uses of this version: the base of a count write.
	StatusUses int64
	// MaxUses is spec.maxUses (0: unlimited; the API admits 1 and above).
	MaxUses int64
	// StatusLastUsed is status.lastUsedAt of this version in Unix seconds
	// (0: never used): a count write never moves it back.
	StatusLastUsed int64
	// NoReservations says status.useReservations is empty in this version:
	// a first reservation may then be written on it, with its
	// resourceVersion as the precondition, without a live read first.
	NoReservations bool
	// IdleTimeout says the link has spec.idleTimeout: its uses are written
	// every round, so that lastUsedAt is never later than the manager's
	// --idle-grace allows.
	IdleTimeout bool
	// Code is status.code: a Forwarder names the link by it, as a click does.
	Code string
	// Peer is the holder and peer address of the reservation with the
	// most quota among those with a peer address and not asked to return
	// (zero: none): where a Forwarder asks for a use.
	Peer Holder
	// ReturnRequested says some reservation is marked returnRequested:
	// its holder, if it is this replica, returns it (see requestReturn).
	ReturnRequested bool
	// Created is metadata.creationTimestamp in Unix seconds: a new link
	// may be reserved ahead of its first click.
	Created int64
	// SplitURLs are the destinations of the link's split (spec.url, then
	// each variant's url, as written; none without variants): the keys of
	// status.variantUses, in the order of CountSplit's slots.
	SplitURLs []string
	// VariantUses is status.variantUses of this version: the base of a
	// count write.
	VariantUses []linkv1.VariantUses
	// StatusPreviewerFetches is status.previewerFetches of this version:
	// the base of a count write.
	StatusPreviewerFetches int64
}

// asLink is the ShortLink of v, as much of it as a reservation write reads.
// key is the link's namespace and name.
func (v LinkVersion) key() types.NamespacedName {
	return types.NamespacedName{Namespace: v.Namespace, Name: v.Name}
}

func (v LinkVersion) asLink() *linkv1.ShortLink {
	l := &linkv1.ShortLink{ObjectMeta: metav1.ObjectMeta{Namespace: v.Namespace, Name: v.Name, ResourceVersion: v.ResourceVersion}}
	l.Status.Uses = v.StatusUses
	if v.StatusLastUsed > 0 {
		t := metav1.Unix(v.StatusLastUsed, 0)
		l.Status.LastUsedAt = &t
	}
	if v.MaxUses > 0 {
		maxUses := v.MaxUses
		l.Spec.MaxUses = &maxUses
	}
	l.Status.VariantUses = v.VariantUses
	return l
}

// Versioned is a version of a link held by the informer (the redirector's
// Link). The counter keeps the newest one to write with, without a copy.
type Versioned interface {
	UsesVersion() LinkVersion
}

// UIDKey is the key of an object's uid in LinkVersion.
func UIDKey(uid types.UID) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(uid))
	return h.Sum64()
}

// Counter is the per-link state of uses in this replica. It outlives the
// versions of the link that point at it (Uses.Attach hands it from one to
// the next while the uid is the same), and is dropped with the link.
//
// Every link of a replica has one, so it holds only what every link
// needs, in 64 bytes (TestCounterSize): the counts not yet written and
// the newest version. The state of a limit and its reservations, which
// most links never have, is in limits, made at its first use.
type Counter struct {
	// pending are the uses served and not yet written.
	pending atomic.Int64
	// previews are the previewer fetches (CountPreviewerFetch) not yet
	// written: not uses, written beside them.
	previews atomic.Int64
	// split are the split clicks not yet written, by destination (nil:
	// the link has no variants).
	split atomic.Pointer[splitCounts]
	// latest is the newest version of the link seen by the informer; its
	// uid is the counter's (Attach).
	latest atomic.Value // Versioned
	next   *Counter     // dirty stack
	// limit is the state of the link's limit and reservations (nil: it
	// never had either); see lim.
	limit atomic.Pointer[limits]
	// queued is true while the counter is on the flusher's dirty stack.
	queued atomic.Bool
}

// limits is the part of a Counter that only a link with spec.maxUses, or
// one with reservations, uses: its quota and its reservation's writes.
type limits struct {
	// taking counts requests between a take of quota and counting it in
	// pending; a release waits for it to drain, so that every use taken
	// from the quota is in the count the release writes.
	taking atomic.Int64
	// quota is what this replica may still serve of a limited link.
	quota atomic.Int64
	// leaseEnd is when this replica stops serving its quota, on Uses'
	// monotonic clock (ns since its base); 0 stops it at once.
	leaseEnd atomic.Int64
	// grantMax is the limit under which the reservation was last written:
	// a version of the link with a lower one stops the quota at once.
	grantMax atomic.Int64

	// Serialized by Uses.lock: reservations and writes of the link.
	// held is this replica's reservation quota as last written (0: none)
	// and heldExpires the expiresAt of that write, which marks it.
	held        int64
	heldExpires time.Time
	// unconfirmed is a write whose outcome is unknown (its response was
	// lost: a timeout after the API server may have applied it); the next
	// live read tells by our reservation's expiresAt whether it was.
	unconfirmed *unconfirmedWrite
	// seen are the other replicas' reservations as this replica saw them.
	seen map[string]Observation
	// block is the size of the next reservation and lastGrant when the last
	// one was granted: a block used up within a flush interval doubles the
	// next, a slower one halves it, so a replica holds about what it serves
	// in an interval, and a killed replica takes little quota with it.
	block     int64
	lastGrant time.Time
	// quietRounds counts the flush rounds in a row in which the link served
	// nothing from its reservation.
	quietRounds int
	// deferred is what pending was when a flush round last left its write
	// to a later round: uses beyond it were served since.
	deferred int64

	// ahead says the reservation held was taken ahead of the link's first
	// click (Ahead): it is kept while unused until aheadUntil (the link's
	// creation plus ReserveAhead), not returned after a lease of quiet.
	ahead      bool
	aheadUntil time.Time

	// noForward (ns on the monotonic clock) is until when requests do not
	// forward: the holder refused the last one.
	noForward atomic.Int64
	// askReturn is the holder a forward could not reach: the next
	// reservation denied asks it to return its quota (see requestReturn).
	askReturn atomic.Pointer[string]
	// noAhead: another replica asked for this replica's reservation ahead,
	// which it returned; it is not reserved ahead here again.
	noAhead atomic.Bool
	// denied (ns on the monotonic clock) is until when a failed reservation
	// is not retried; deniedGone says the limit was reached (410), not
	// merely busy (503).
	denied     atomic.Int64
	deniedGone atomic.Bool
	retryAfter atomic.Int64 // seconds, for the 503's Retry-After
}

// lim is c's limits, made at the first use: by Attach for a version with
// a limit or reservations, else by whatever first serves, reserves or
// writes quota (a version without either that still has some). Code that
// a link without a limit runs reads c.limit instead, and takes a nil as
// the zero limits it stands for.
func (c *Counter) lim() *limits {
	if l := c.limit.Load(); l != nil {
		return l
	}
	c.limit.CompareAndSwap(nil, &limits{})
	return c.limit.Load()
}

// uid is the UIDKey of the link's uid.
func (c *Counter) uid() uint64 {
	v, _ := c.version()
	return v.UID
}

// unconfirmedWrite is a reservation write whose response was lost.
type unconfirmedWrite struct {
	served  int64     // the uses it reported
	mine    int64     // the reservation it wrote
	expires time.Time // its expiresAt (zero: it wrote no reservation)
	delta   int64     // what it changed of the quota served (see writeReservation)
	sent    time.Time // when it was sent: its lease's start
	// forfeited is the quota of others' reservations it took back.
	forfeited int64
	// maxUses is the limit it was written under.
	maxUses int64
	// split are the split clicks it reported.
	split splitTaken
}

// RetryAfter is the Retry-After, in seconds, of a 503 of this link.
func (c *Counter) RetryAfter() int64 {
	if l := c.limit.Load(); l != nil {
		return l.retryAfter.Load()
	}
	return 0
}

// take serves one use from this replica's quota: atomics only.
func (l *limits) take(now int64) bool {
	if now >= l.leaseEnd.Load() {
		return false
	}
	for {
		q := l.quota.Load()
		if q <= 0 {
			return false
		}
		if l.quota.CompareAndSwap(q, q-1) {
			return true
		}
	}
}

func (c *Counter) version() (LinkVersion, bool) {
	v, _ := c.latest.Load().(Versioned)
	if v == nil {
		return LinkVersion{}, false
	}
	return v.UsesVersion(), true
}

func (c *Counter) name() string {
	if v, ok := c.version(); ok {
		return v.Namespace + "/" + v.Name
	}
	return ""
}
