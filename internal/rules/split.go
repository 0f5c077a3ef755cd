package rules

// The split's buckets: a client's bucket (0-99, variant.go) is fixed; which
// destination holds each bucket is the link's assignment, which the
// controller writes in status.splitBuckets when it confirms a spec
// (Assign), from the assignment before, so that a change of the weights
// moves only the clients it must:
//
//   - a variant keeps the buckets it held, up to its new weight (it gives
//     up its highest ones when its weight falls);
//   - a variant that needs more takes first the buckets spec.url held,
//     then (only when spec.url has too few) buckets other variants gave up;
//   - spec.url holds every bucket no variant holds.
//
// So a variant's weight going from 30 to 20 moves 10% of the clients, from
// that variant to spec.url, none between variants; a variant going up takes
// clients from spec.url only. No assignment that depends on the weights
// alone can promise that with three variants or more (a variant's buckets
// would have to be disjoint from another's for every pair of weights that
// fit), hence the one kept in the status. Without one (a link from before,
// or restored without its status) the assignment is Assign's from none:
// each variant in spec order takes the buckets after those of the
// variants before it, the layout of cumulative ranges.

import (
	"fmt"
	"math/bits"
	"strconv"
	"strings"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

// numBuckets is how many buckets a split has: the weights are percentages.
const numBuckets = 100

// bucketSet is a set of buckets, bit b for bucket b.
type bucketSet [2]uint64

func (s *bucketSet) add(b int)                  { s[b>>6] |= 1 << (b & 63) }
func (s *bucketSet) has(b int) bool             { return s[b>>6]&(1<<(b&63)) != 0 }
func (s bucketSet) len() int                    { return bits.OnesCount64(s[0]) + bits.OnesCount64(s[1]) }
func (s bucketSet) minus(o bucketSet) bucketSet { return bucketSet{s[0] &^ o[0], s[1] &^ o[1]} }
func (s bucketSet) union(o bucketSet) bucketSet { return bucketSet{s[0] | o[0], s[1] | o[1]} }

// all is every bucket.
var all = func() (s bucketSet) {
	for b := range numBuckets {
		s.add(b)
	}
	return s
}()

// lowest is the n lowest buckets of s.
func (s bucketSet) lowest(n int) (out bucketSet) {
	for b := 0; b < numBuckets && n > 0; b++ {
		if s.has(b) {
			out.add(b)
			n--
		}
	}
	return out
}

// String writes the set as ascending ranges: "0-19,45,50-58".
func (s bucketSet) String() string {
	var b strings.Builder
	for lo := 0; lo < numBuckets; lo++ {
		if !s.has(lo) {
			continue
		}
		hi := lo
		for hi+1 < numBuckets && s.has(hi+1) {
			hi++
		}
		if b.Len() > 0 {
			b.WriteByte(',')
		}
		b.WriteString(strconv.Itoa(lo))
		if hi > lo {
			b.WriteByte('-')
			b.WriteString(strconv.Itoa(hi))
		}
		lo = hi
	}
	return b.String()
}

// parseBuckets reads a set written as String writes it; ranges must
// ascend and not overlap, within 0-99.
func parseBuckets(text string) (bucketSet, error) {
	var s bucketSet
	next := 0
	for _, part := range strings.Split(text, ",") {
		loText, hiText, isRange := strings.Cut(part, "-")
		lo, err := strconv.Atoi(loText)
		hi := lo
		if err == nil && isRange {
			hi, err = strconv.Atoi(hiText)
		}
		if err != nil || lo < next || hi < lo || hi >= numBuckets {
			return bucketSet{}, fmt.Errorf("%q is not a list of ascending buckets 0-99 such as 0-19,45,50-58", text)
		}
		for b := lo; b <= hi; b++ {
			s.add(b)
		}
		next = hi + 1
	}
	return s, nil
}

// Assign is the split's assignment for spec's variants (none without
// variants), moving as few clients as it can from prev, the assignment of
// the spec before (status.splitBuckets; nil for none): see the top of this
// file. An entry of prev that does not parse, names no variant of spec, or
// repeats buckets an entry before it holds is read as holding nothing (or
// only the buckets not yet held). Given its own result for the same spec,
// it returns that again.
func Assign(spec *linkv1.ShortLinkSpec, prev []linkv1.SplitBuckets) []linkv1.SplitBuckets {
	sets := assign(spec.Variants, prev)
	if len(sets) == 0 {
		return nil
	}
	out := make([]linkv1.SplitBuckets, len(sets))
	for i, s := range sets {
		out[i] = linkv1.SplitBuckets{URL: string(spec.Variants[i].URL), Buckets: s.String()}
	}
	return out
}

// assign is Assign's sets, one per variant.
func assign(variants []linkv1.Variant, prev []linkv1.SplitBuckets) []bucketSet {
	if len(variants) == 0 {
		return nil
	}
	// What each url held before, each bucket held once.
	held := map[string]bucketSet{}
	var heldAny bucketSet
	for _, p := range prev {
		s, err := parseBuckets(p.Buckets)
		url := strings.TrimSpace(p.URL)
		if _, dup := held[url]; err != nil || dup {
			continue
		}
		s = s.minus(heldAny)
		held[url], heldAny = s, heldAny.union(s)
	}
	// Each variant keeps what it held, up to its weight.
	sets := make([]bucketSet, len(variants))
	var kept bucketSet
	for i, v := range variants {
		url := strings.TrimSpace(string(v.URL))
		s := held[url]
		delete(held, url) // a repeated url holds nothing the first did not
		if w := int(max(v.Weight, 0)); s.len() > w {
			s = s.lowest(w)
		}
		sets[i], kept = s, kept.union(s)
	}
	// The others take what spec.url held, then what variants gave up.
	fromURL, givenUp := all.minus(heldAny), heldAny.minus(kept)
	for i, v := range variants {
		need := int(max(v.Weight, 0)) - sets[i].len()
		if need <= 0 {
			continue
		}
		take := fromURL.lowest(need)
		fromURL = fromURL.minus(take)
		if n := take.len(); n < need {
			more := givenUp.lowest(need - n)
			givenUp, take = givenUp.minus(more), take.union(more)
		}
		sets[i] = sets[i].union(take)
	}
	return sets
}

// slotTable is, for each bucket, the index in SplitURLs of its destination
// (0: spec.url, i+1: variant i), four bits a bucket.
type slotTable [numBuckets / 2]uint8

func (t *slotTable) set(b int, slot uint8) { t[b>>1] |= slot << ((b & 1) << 2) }

// slot is bucket b's destination.
func (t *slotTable) slot(b uint64) uint8 { return t[b>>1] >> ((b & 1) << 2) & 15 }

// A slot fits in four bits.
var _ = [1]struct{}{}[linkv1.MaxVariants/16]

func newSlotTable(sets []bucketSet) (t slotTable) {
	for i, s := range sets {
		for b := range numBuckets {
			if s.has(b) {
				t.set(b, uint8(i+1))
			}
		}
	}
	return t
}
