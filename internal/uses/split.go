package uses

import (
	"slices"
	"sync/atomic"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

// The clicks of a link's split (spec.variants and spec.url's share of
// them) are counted per destination beside its uses and written with them,
// in the same patch, as status.variantUses: the split adds no write. A
// destination's count is keyed by its url as the spec writes it, and only
// the destinations of the newest version are written, so one that leaves
// the spec leaves the list at the next write.

// splitSlots bounds the destinations of a split: spec.url and the variants.
const splitSlots = linkv1.MaxVariants + 1

// splitCounts are the split clicks of a link not yet written: n[i] counts
// those sent to keys[i] (LinkVersion.SplitURLs).
type splitCounts struct {
	keys []string
	n    [splitSlots]atomic.Int64
	// 128 bytes in all, a size class whose objects start on a cache line:
	// a click reads len(keys) and adds to n[slot], one line for the first
	// five slots (spec.url's and four variants'), where at 112 bytes most
	// objects straddle two. Among many links each is a trip to memory.
	_ [16]byte
}

// splitTaken are the split clicks a write reports, taken out of the counts.
type splitTaken struct {
	from *splitCounts
	n    [splitSlots]int64
}

// CountSplit records n split clicks (-1 takes back one not served) sent to
// the destination of index slot in the version's SplitURLs: an atomic
// add on the request path. Call it before the use is counted (Count,
// Take), so that a write that reports the use reports the click too.
func (c *Counter) CountSplit(slot int, n int64) {
	if s := c.split.Load(); s != nil && slot >= 0 && slot < len(s.keys) {
		s.n[slot].Add(n)
	}
}

// resplit makes keys the destinations of c's split counts, when they
// changed: the counts of those that stay are carried over, the others
// dropped (a click counted on the old counts meanwhile is lost: edits of
// the variants are rare, and the total stays right in status.uses).
func (c *Counter) resplit(keys []string) {
	old := c.split.Load()
	if old == nil && len(keys) == 0 || old != nil && slices.Equal(old.keys, keys) {
		return
	}
	var cur *splitCounts
	if len(keys) > 0 {
		cur = &splitCounts{keys: slices.Clone(keys[:min(len(keys), splitSlots)])}
	}
	c.split.Store(cur)
	if old == nil || cur == nil {
		return
	}
	for i, k := range old.keys {
		if n := old.n[i].Swap(0); n != 0 {
			if j := slices.Index(cur.keys, k); j >= 0 {
				cur.n[j].Add(n)
			}
		}
	}
}

// splitPending reports whether c has split clicks not yet written.
func (c *Counter) splitPending() bool {
	if s := c.split.Load(); s != nil {
		for i := range s.keys {
			if s.n[i].Load() != 0 {
				return true
			}
		}
	}
	return false
}

// takeSplit takes out the split clicks not yet written.
func (c *Counter) takeSplit() splitTaken {
	t := splitTaken{from: c.split.Load()}
	if t.from != nil {
		for i := range t.from.keys {
			t.n[i] = t.from.n[i].Swap(0)
		}
	}
	return t
}

// putBack returns clicks taken for a write that was not applied.
func (t *splitTaken) putBack() {
	if t.from == nil {
		return
	}
	for i := range t.from.keys {
		if t.n[i] != 0 {
			t.from.n[i].Add(t.n[i])
		}
	}
}

// variantUses is status.variantUses after a write that reports t on a
// status showing base: one entry per destination of the split, its count
// in base plus the clicks taken; nil when the link has no split. keep
// reports whether the write must set the field: the link has a split, or
// base still lists destinations (the split was removed: the write clears
// them).
func (t *splitTaken) variantUses(base []linkv1.VariantUses) (out []linkv1.VariantUses, set bool) {
	if t.from == nil {
		return nil, len(base) > 0
	}
	out = make([]linkv1.VariantUses, 0, len(t.from.keys))
	for i, k := range t.from.keys {
		n := t.n[i]
		for _, b := range base {
			if b.URL == k {
				n += b.Uses
				break
			}
		}
		out = append(out, linkv1.VariantUses{URL: k, Uses: max(n, 0)})
	}
	return out, true
}
