package redirect

import (
	"hash/maphash"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/linkforge/linkforge/internal/claim"
)

// numShards is the number of independently locked parts of the index. A
// request read-locks one shard, so readers on different cores rarely touch the
// same lock word and writers (informer events) never block the whole index.
const numShards = 64

type key struct{ ns, code string }

type shard struct {
	mu sync.RWMutex
	// m is what answers for a key, by the key's 64-bit hash: the winner of
	// the ownership rule among the links whose confirmed hold is that code,
	// or a tombstone. A Link knows its key, so a lookup checks it; a key
	// whose hash is taken by another key (never seen in practice, but
	// possible) lives in other instead. Hash keys make a slot 16 bytes
	// instead of 40, which is most of the index's own memory.
	m     map[uint64]*Link
	other map[key]*Link
	// holders lists every confirmed holder of the keys that have more than
	// one (rare: a hand-over the cache briefly shows). Writers only.
	holders map[key][]*Link
	_       [32]byte // keep neighbouring shards' locks off one cache line
}

func (l *Link) hasKey(k key) bool { return l.Code == k.code && l.Namespace == k.ns }

// get returns the answer for k (hash h). Callers hold the lock.
func (s *shard) get(h uint64, k key) *Link {
	l := s.m[h]
	if l != nil && l.hasKey(k) {
		return l
	}
	if len(s.other) > 0 {
		return s.other[k]
	}
	return nil
}

// set makes l the answer for k (hash h); nil removes it. Callers hold the
// write lock.
func (s *shard) set(h uint64, k key, l *Link) {
	if _, ok := s.other[k]; ok {
		if l == nil {
			delete(s.other, k)
		} else {
			s.other[k] = l
		}
		return
	}
	cur := s.m[h]
	switch {
	case cur == nil || cur.hasKey(k):
		if l == nil {
			delete(s.m, h)
		} else {
			s.m[h] = l
		}
	case l != nil:
		s.other[k] = l
	}
}

type tombRef struct {
	k key
	l *Link
}

// Index maps (namespace, code) to the Link that answers for it. It is fed by
// informer events and read by requests: a read is one shard's read lock and
// one map lookup, no allocation. Links are immutable, so a request uses the
// one it found after releasing the lock.
type Index struct {
	seed   maphash.Seed
	shards [numShards]shard

	links atomic.Int64 // keys with a live holder
	tombs atomic.Int64 // keys with a tombstone

	tombTTL time.Duration
	tombMu  sync.Mutex
	tombQ   []tombRef // in creation order, so in order of expiry
}

// NewIndex returns an empty index whose tombstones last tombstoneTTL (0: none).
func NewIndex(tombstoneTTL time.Duration) *Index {
	x := &Index{seed: maphash.MakeSeed(), tombTTL: tombstoneTTL}
	for i := range x.shards {
		x.shards[i].m = make(map[uint64]*Link)
		x.shards[i].other = make(map[key]*Link)
		x.shards[i].holders = make(map[key][]*Link)
	}
	return x
}

// locate returns the hash of k and its shard.
func (x *Index) locate(k key) (uint64, *shard) {
	h := maphash.Comparable(x.seed, k)
	return h, &x.shards[h>>58] // the top bits: the map uses the low ones
}

// Lookup returns the Link that answers for (ns, code) (possibly a tombstone),
// or nil.
func (x *Index) Lookup(ns, code string) *Link {
	k := key{ns, code}
	h, s := x.locate(k)
	s.mu.RLock()
	l := s.get(h, k)
	s.mu.RUnlock()
	return l
}

// Links is the number of (namespace, code) keys that have a live holder.
func (x *Index) Links() int64 { return x.links.Load() }

// Tombstones is the number of keys that answer 410 for a deleted link.
func (x *Index) Tombstones() int64 { return x.tombs.Load() }

// Add indexes a link if it holds a confirmed code, replacing an earlier
// version of it under the same code.
func (x *Index) Add(l *Link) {
	if l == nil || !l.Confirmed() || l.Code == "" {
		return
	}
	k := key{l.Namespace, l.Code}
	h, s := x.locate(k)
	s.mu.Lock()
	x.setLocked(s, h, k, l, "", nil)
	s.mu.Unlock()
}

// Update applies an informer update: the new version is indexed first and the
// old one removed after, so a code never answers 404 in between.
//
// A version whose spec the controller has not checked yet changes nothing:
// the version it last confirmed keeps answering, so an unchecked URL never
// reaches a Location header and an edit never answers 404.
func (x *Index) Update(old, cur *Link) {
	if cur != nil && cur.is(flagSpecAhead) {
		return
	}
	x.Add(cur)
	if old == nil || !old.indexed() || old.Code == "" {
		return
	}
	if cur == nil || !cur.Confirmed() || cur.Code != old.Code || cur.Namespace != old.Namespace || cur.Name != old.Name {
		x.remove(old, nil)
	}
}

// Delete removes a deleted link. If it had finished (expired at now,
// exhausted, or reported finished by the controller) and leaves its code
// without another holder, a tombstone answers 410 for the code for the
// index's tombstone TTL.
func (x *Index) Delete(l *Link, now time.Time) {
	if l == nil || !l.indexed() || l.Code == "" {
		return
	}
	var tomb *Link
	if x.tombTTL > 0 && l.Gone(now) {
		tomb = &Link{Namespace: l.Namespace, Name: l.Name, Code: l.Code,
			until: now.Add(x.tombTTL).UnixNano(), flags: flagTombstone | l.flags&flagEventPlain}
		if c := l.routing(); c != nil && c.ExpiredURL() != "" {
			// Its clicks keep going where the finished link sent them.
			tomb.more, tomb.flags = &linkMore{routing: c}, tomb.flags|flagRouted
		}
	}
	if x.remove(l, tomb) {
		x.tombMu.Lock()
		x.tombQ = append(x.tombQ, tombRef{key{l.Namespace, l.Code}, tomb})
		x.tombMu.Unlock()
	}
}

func (x *Index) remove(l, tomb *Link) bool {
	k := key{l.Namespace, l.Code}
	h, s := x.locate(k)
	s.mu.Lock()
	defer s.mu.Unlock()
	return x.setLocked(s, h, k, nil, l.Name, tomb)
}

// setLocked rewrites the holders of k: it adds add (replacing a holder of the
// same name), drops the holder named drop, and serves the winner of the
// ownership rule. If the last holder is dropped and tomb is set, tomb takes
// the key; it reports whether it did.
func (x *Index) setLocked(s *shard, h uint64, k key, add *Link, drop string, tomb *Link) bool {
	cur := s.get(h, k)
	wasLive := cur != nil && !cur.is(flagTombstone)
	wasTomb := cur != nil && cur.is(flagTombstone)

	var hs []*Link
	if many, ok := s.holders[k]; ok {
		hs = slices.Clone(many)
	} else if wasLive {
		hs = []*Link{cur}
	}
	dropped := false
	hs = slices.DeleteFunc(hs, func(h *Link) bool {
		if add != nil && h.Name == add.Name {
			return true
		}
		if drop != "" && h.Name == drop {
			dropped = true
			return true
		}
		return false
	})
	if add != nil {
		hs = append(hs, add)
	}

	placed := false
	switch {
	case len(hs) > 0:
		w := 0
		if len(hs) > 1 {
			links := make([]claim.Link, len(hs))
			for i, h := range hs {
				links[i] = h.claim()
			}
			w = max(claim.Winner(links), 0)
			s.holders[k] = hs
		} else {
			delete(s.holders, k)
		}
		s.set(h, k, hs[w])
	case dropped && tomb != nil:
		delete(s.holders, k)
		s.set(h, k, tomb)
		placed = true
	case dropped || add != nil:
		delete(s.holders, k)
		s.set(h, k, nil)
	}
	now := s.get(h, k)
	nowLive := now != nil && !now.is(flagTombstone)
	nowTomb := now != nil && now.is(flagTombstone)
	x.links.Add(b2i(nowLive) - b2i(wasLive))
	x.tombs.Add(b2i(nowTomb) - b2i(wasTomb))
	return placed
}

func b2i(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// SweepTombstones forgets the tombstones that ended before now. Requests
// already answer 404 for them; this bounds the memory they hold.
func (x *Index) SweepTombstones(now time.Time) {
	n := now.UnixNano()
	x.tombMu.Lock()
	defer x.tombMu.Unlock()
	i := 0
	for ; i < len(x.tombQ) && x.tombQ[i].l.until <= n; i++ {
		t := x.tombQ[i]
		h, s := x.locate(t.k)
		s.mu.Lock()
		if s.get(h, t.k) == t.l {
			s.set(h, t.k, nil)
			x.tombs.Add(-1)
		}
		s.mu.Unlock()
	}
	if i > 0 {
		rest := copy(x.tombQ, x.tombQ[i:])
		clear(x.tombQ[rest:])
		x.tombQ = x.tombQ[:rest]
	}
}
