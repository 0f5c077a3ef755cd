package claim

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestDecideDedupOff is the rule for links with dedup off (Exclusive): the
// conformance cases of docs/concepts.md, "Dedup off".
func TestDecideDedupOff(t *testing.T) {
	tests := []struct {
		name       string
		self       Link
		candidates []string
		rivals     []Link
		want       Decision
	}{
		{
			name: "alone: salt 0", candidates: hashed,
			self: Link{Name: "self", Created: at(10), Target: "T", Exclusive: true},
			want: Decision{Outcome: Assigned, Code: "c0"},
		},
		{
			name: "new, an older twin holds salt 0: salt 1, the oldest keeps salt 0", candidates: hashed,
			self:   Link{Name: "self", Created: at(10), Target: "T", Exclusive: true},
			rivals: []Link{{Name: "old", Created: at(1), Target: "T", Held: "c0", Confirmed: true}},
			want:   Decision{Outcome: Assigned, Code: "c1", Salt: 1},
		},
		{
			name: "does not join a twin's salt 1: takes the free salt 0", candidates: hashed,
			self:   Link{Name: "self", Created: at(10), Target: "T", Exclusive: true},
			rivals: []Link{{Name: "old", Created: at(1), Target: "T", Held: "c1", Confirmed: true}},
			want:   Decision{Outcome: Assigned, Code: "c0"},
		},
		{
			name: "dedup on, an older twin with dedup off holds salt 0: salt 1, shared with nobody", candidates: hashed,
			self:   Link{Name: "self", Created: at(10), Target: "T"},
			rivals: []Link{{Name: "old", Created: at(1), Target: "T", Held: "c0", Confirmed: true, Exclusive: true}},
			want:   Decision{Outcome: Assigned, Code: "c1", Salt: 1},
		},
		{
			name: "dedup on joins the twin with dedup on, not the older one with dedup off", candidates: hashed,
			self: Link{Name: "self", Created: at(10), Target: "T"},
			rivals: []Link{
				{Name: "old", Created: at(1), Target: "T", Held: "c0", Confirmed: true, Exclusive: true},
				{Name: "mid", Created: at(5), Target: "T", Held: "c1", Confirmed: true},
			},
			want: Decision{Outcome: Assigned, Code: "c1", Salt: 1, Twin: "mid"},
		},
		{
			name: "new and older than a twin that took salt 0 first: pending on salt 0", candidates: hashed,
			self:   Link{Name: "self", Created: at(10), Target: "T", Exclusive: true},
			rivals: []Link{{Name: "young", Created: at(20), Target: "T", Held: "c0", Confirmed: true}},
			want:   Decision{Outcome: Pending, Code: "c0", Rival: "young"},
		},
		{
			name: "the younger twin makes way for an older twin with dedup off that claims its code", candidates: hashed,
			self:   Link{Name: "young", Created: at(20), Target: "T", Held: "c0", Confirmed: true},
			rivals: []Link{{Name: "old", Created: at(10), Target: "T", Held: "c0", Exclusive: true}},
			want:   Decision{Outcome: Assigned, Code: "c1", Salt: 1},
		},
		{
			name: "turned off: leaves the shared code for the next salt no link holds", candidates: hashed,
			self: Link{Name: "self", Created: at(10), Target: "T", Held: "c0", Confirmed: true, Exclusive: true},
			rivals: []Link{
				{Name: "twin", Created: at(20), Target: "T", Held: "c0", Confirmed: true},
				// Younger: it would lose c1 to self by age, but self moves nobody.
				{Name: "other", Created: at(30), Target: "A", Held: "c1", Confirmed: true},
			},
			want: Decision{Outcome: Assigned, Code: "c2", Salt: 2},
		},
		{
			name: "turned off on the older twin: the younger keeps the shared code, not pending", candidates: hashed,
			self:   Link{Name: "self", Created: at(20), Target: "T", Held: "c0", Confirmed: true},
			rivals: []Link{{Name: "old", Created: at(10), Target: "T", Held: "c0", Confirmed: true, Exclusive: true}},
			want:   Decision{Outcome: Assigned, Code: "c0", Twin: "old"},
		},
		{
			name: "turned off on both: the older keeps the code", candidates: hashed,
			self:   Link{Name: "self", Created: at(10), Target: "T", Held: "c0", Confirmed: true, Exclusive: true},
			rivals: []Link{{Name: "young", Created: at(20), Target: "T", Held: "c0", Confirmed: true, Exclusive: true}},
			want:   Decision{Outcome: Assigned, Code: "c0", Twin: "young"},
		},
		{
			name: "turned off on both: the younger leaves", candidates: hashed,
			self:   Link{Name: "self", Created: at(20), Target: "T", Held: "c0", Confirmed: true, Exclusive: true},
			rivals: []Link{{Name: "old", Created: at(10), Target: "T", Held: "c0", Confirmed: true, Exclusive: true}},
			want:   Decision{Outcome: Assigned, Code: "c1", Salt: 1},
		},
		{
			name: "turned off, every other salt held: keeps sharing rather than move a link", candidates: hashed[:3],
			self: Link{Name: "self", Created: at(10), Target: "T", Held: "c0", Confirmed: true, Exclusive: true},
			rivals: []Link{
				{Name: "twin", Created: at(20), Target: "T", Held: "c0", Confirmed: true},
				{Name: "b", Created: at(30), Target: "B", Held: "c1", Confirmed: true},
				{Name: "c", Created: at(30), Target: "C", Held: "c2", Confirmed: true},
			},
			want: Decision{Outcome: Assigned, Code: "c0", Twin: "twin"},
		},
		{
			name: "a custom code shared with a twin, turned off: keeps sharing, it has no other code", candidates: []string{"docs"},
			self:   Link{Name: "self", Created: at(10), Target: "T", Custom: "docs", Held: "docs", Confirmed: true, Exclusive: true},
			rivals: []Link{{Name: "twin", Created: at(20), Target: "T", Custom: "docs", Held: "docs", Confirmed: true}},
			want:   Decision{Outcome: Assigned, Code: "docs", Twin: "twin"},
		},
		{
			name: "a custom code declared by an older twin with dedup off: conflict", candidates: []string{"docs"},
			self:   Link{Name: "self", Created: at(10), Target: "T", Custom: "docs"},
			rivals: []Link{{Name: "old", Created: at(1), Target: "T", Custom: "docs", Held: "docs", Confirmed: true, Exclusive: true}},
			want:   Decision{Outcome: Conflict, Rival: "old"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Decide(tt.self, tt.candidates, tt.rivals); got != tt.want {
				t.Fatalf("Decide = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// namespace is a namespace of links run by the rule, as the controller runs
// it: one link decided at a time, against the others as they stand.
type namespace struct {
	links []Link
	cands [][]string
	// hashedOf is each target's hashed codes.
	hashedOf [3][]string
}

func (n *namespace) clone() *namespace {
	return &namespace{links: slices.Clone(n.links), cands: slices.Clone(n.cands), hashedOf: n.hashedOf}
}

// decide applies one decision to link i and reports whether it changed it.
func (n *namespace) decide(i int) bool {
	d := Decide(n.links[i], n.cands[i], n.links)
	l := &n.links[i]
	was := *l
	switch d.Outcome {
	case Assigned, Kept:
		l.Held, l.Confirmed = d.Code, true
	case Pending:
		l.Held, l.Confirmed = d.Code, false
	case Conflict:
		l.Held, l.Confirmed = "", false
	}
	return *l != was
}

// settle decides every link in order, pass after pass, until a pass changes
// nothing. It fails the test if no pass is quiet within a bound.
func (n *namespace) settle(t *testing.T, order []int) {
	t.Helper()
	for pass := 0; pass < 8*len(n.links)+8; pass++ {
		changed := false
		for _, i := range order {
			changed = n.decide(i) || changed
		}
		if !changed {
			return
		}
	}
	t.Fatalf("no fixed point:\n%s", n)
}

func (n *namespace) String() string {
	var b strings.Builder
	for i, l := range n.links {
		fmt.Fprintf(&b, "  %s created %d target %s exclusive %v custom %q cands %v: held %q confirmed %v\n",
			l.Name, l.Created.Sub(t0)/1e9, l.Target, l.Exclusive, l.Custom, n.cands[i], l.Held, l.Confirmed)
	}
	return b.String()
}

func (n *namespace) holds() []string {
	out := make([]string, len(n.links))
	for i, l := range n.links {
		out[i] = fmt.Sprintf("%s:%v", l.Held, l.Confirmed)
	}
	return out
}

// checkSettled checks the invariants of a settled namespace: nobody waits,
// and two links that hold one code share it (one target, dedup on for
// both). stuck, if set, may share its code with a link of its target
// although its dedup is off, when every other code it may take is held.
func (n *namespace) checkSettled(t *testing.T, what string, stuck int) {
	t.Helper()
	for i := range n.links {
		a := &n.links[i]
		if a.Held != "" && !a.Confirmed {
			t.Fatalf("%s: %s still pending on %s at a fixed point:\n%s", what, a.Name, a.Held, n)
		}
		for j := i + 1; j < len(n.links); j++ {
			b := &n.links[j]
			if a.Held == "" || a.Held != b.Held || shares(a, b) {
				continue
			}
			if a.Target == b.Target && (i == stuck || j == stuck) && n.othersHeld(stuck) {
				continue
			}
			t.Fatalf("%s: %s and %s hold %s and may not share it:\n%s", what, a.Name, b.Name, a.Held, n)
		}
	}
}

// othersHeld reports whether every candidate of link i but the code it
// holds is held by another link.
func (n *namespace) othersHeld(i int) bool {
	for _, c := range n.cands[i] {
		if c != n.links[i].Held && !slices.ContainsFunc(n.links, func(o Link) bool { return o.Name != n.links[i].Name && o.Held == c }) {
			return false
		}
	}
	return true
}

// newNamespace builds up to six links from data: their targets (three),
// dedup, custom codes and ages, and each target's three hashed codes from a
// small alphabet (shared with the custom codes), so that codes collide.
func newNamespace(data []byte) *namespace {
	next := func() byte {
		if len(data) == 0 {
			return 0
		}
		b := data[0]
		data = data[1:]
		return b
	}
	alphabet := []string{"a", "b", "c", "d", "k"}
	var hashedOf [3][]string
	for t := range hashedOf {
		for len(hashedOf[t]) < 3 {
			c := alphabet[int(next())%len(alphabet)]
			if !slices.Contains(hashedOf[t], c) {
				hashedOf[t] = append(hashedOf[t], c)
			} else if len(data) == 0 {
				hashedOf[t] = append(hashedOf[t], fmt.Sprintf("z%d%d", t, len(hashedOf[t])))
			}
		}
	}
	n := &namespace{hashedOf: hashedOf}
	head := next()
	count := 2 + int(head)%5
	copies := head&0x80 != 0 // copies of one URL: one target, hashed codes, dedup off
	for i := range count {
		b := next()
		if copies {
			b &^= 0x1b // target 0, no custom code
			if i > 0 {
				b |= 0x04 // dedup off but for the first
			}
		}
		l := Link{
			Name:      fmt.Sprintf("l%d", i),
			Target:    fmt.Sprintf("T%d", b%3),
			Exclusive: b&4 != 0,
			Created:   at(int(b>>5) % 4),
		}
		cands := hashedOf[b%3]
		if custom := (b >> 3) % 4; custom == 1 || custom == 2 {
			l.Custom = []string{"k", "b"}[custom-1]
			cands = []string{l.Custom}
		}
		n.links = append(n.links, l)
		n.cands = append(n.cands, cands)
	}
	return n
}

// respec changes link i's spec as b says, as an edit does, leaving what
// it holds for the next decision: another custom code of its target, the
// hashed codes of another target, or a custom code of another target.
func (n *namespace) respec(i int, b byte) {
	l := &n.links[i]
	custom := []string{"k", "b"}[b>>2&1]
	if custom == l.Custom {
		custom = []string{"k", "b"}[1-b>>2&1]
	}
	if b%3 != 0 {
		l.Target = fmt.Sprintf("T%d", (int(l.Target[1]-'0')+1+int(b>>3&1))%3)
	}
	switch b % 3 {
	case 1:
		l.Custom, n.cands[i] = "", n.hashedOf[l.Target[1]-'0']
	default:
		l.Custom, n.cands[i] = custom, []string{custom}
	}
}

// heldByOther reports whether a link but the i-th holds code, confirmed.
func (n *namespace) heldByOther(i int, code string) bool {
	return slices.ContainsFunc(n.links, func(o Link) bool {
		return o.Name != n.links[i].Name && o.Held == code && o.Confirmed
	})
}

// precedenceOrder is the links in creation order (the rule's precedence).
func (n *namespace) precedenceOrder() []int {
	order := make([]int, len(n.links))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(a, b int) int {
		switch {
		case Precedes(n.links[a], n.links[b]):
			return -1
		case Precedes(n.links[b], n.links[a]):
			return 1
		}
		return 0
	})
	return order
}

// copiesOfOneURL reports whether the namespace is links of one target with
// hashed codes, at most one of them with dedup on: copies of one URL with
// dedup off, as a bulk apply creates them. (With two copies with dedup on,
// they share the code the first of them took, which can depend on the
// order of decisions when others compete for it: the dedup rule as it
// always was, see checkNamespace.)
func (n *namespace) copiesOfOneURL() bool {
	shared := 0
	for _, l := range n.links {
		if l.Custom != "" || l.Target != n.links[0].Target {
			return false
		}
		if !l.Exclusive {
			shared++
		}
	}
	return shared <= 1
}

// checkNamespace runs the properties of the rule on one namespace:
//   - from no codes at all, every order of decisions reaches a fixed point
//     that holds the invariants (checkSettled);
//   - for copies of one URL with dedup off, that fixed point is the one of
//     deciding the links in creation order, whatever the order, and the
//     oldest link holds salt 0. (Not for every namespace: a link with dedup
//     on joins the code its twin took first, which can depend on the order
//     of decisions when other links compete for codes; so it always was.)
//   - from there, turning dedup off for one link, then on again, moves no
//     other link's code, and the namespace settles again.
func checkNamespace(t *testing.T, start *namespace, seed uint64) {
	t.Helper()
	rng := rand.New(rand.NewPCG(seed, 0))
	ref := start.clone()
	order := ref.precedenceOrder()
	ref.settle(t, order)
	ref.checkSettled(t, "creation order", -1)
	if oldest := order[0]; start.copiesOfOneURL() && ref.links[oldest].Held != ref.cands[oldest][0] {
		t.Fatalf("the oldest copy, %s, holds %q, not salt 0:\n%s", ref.links[oldest].Name, ref.links[oldest].Held, ref)
	}
	for range 3 {
		n := start.clone()
		order := rng.Perm(len(n.links))
		n.settle(t, order)
		n.checkSettled(t, fmt.Sprintf("order %v", order), -1)
		if got, want := n.holds(), ref.holds(); start.copiesOfOneURL() && !slices.Equal(got, want) {
			t.Fatalf("order %v settles on %v, creation order on %v:\n%s", order, got, want, n)
		}
	}
	// An edit of one link's code or target (issue 54): the namespace
	// settles again, and the code the link held still answers: it holds
	// it, or another link does (one that wanted it, or its twin), unless
	// the link moved to a new code.
	for i := range ref.links {
		n := ref.clone()
		was := n.links[i]
		n.respec(i, byte(rng.Uint32()))
		what := fmt.Sprintf("%s respecified to target %s, custom %q", was.Name, n.links[i].Target, n.links[i].Custom)
		n.settle(t, rng.Perm(len(n.links)))
		n.checkSettled(t, what, -1)
		now := n.links[i]
		if was.Held != "" && was.Confirmed && now.Held != was.Held && !slices.Contains(n.cands[i], now.Held) && !n.heldByOther(i, was.Held) {
			t.Fatalf("%s: it let %s go for %q, and no link holds %s:\nbefore:\n%s\nafter:\n%s", what, was.Held, now.Held, was.Held, ref, n)
		}
	}
	for flip := range ref.links {
		for _, exclusive := range []bool{true, false} {
			n := ref.clone()
			if n.links[flip].Exclusive == exclusive {
				continue
			}
			before := n.holds()
			n.links[flip].Exclusive = exclusive
			n.settle(t, rng.Perm(len(n.links)))
			n.checkSettled(t, fmt.Sprintf("%s with exclusive=%v", n.links[flip].Name, exclusive), flip)
			after := n.holds()
			// A link in conflict may get a code (it may share now). A link
			// that holds one keeps it, unless one that waited for a code
			// (in conflict) got in: the link that left freed a code that
			// the waiting one wins by age, as when a link is deleted.
			waiterGotIn := slices.ContainsFunc(ref.links, func(l Link) bool {
				i := slices.IndexFunc(n.links, func(o Link) bool { return o.Name == l.Name })
				return l.Held == "" && n.links[i].Held != "" && i != flip
			})
			for i := range after {
				if i != flip && ref.links[i].Confirmed && after[i] != before[i] && !waiterGotIn {
					t.Fatalf("setting exclusive=%v on %s moved %s from %s to %s:\nbefore %v\n%s",
						exclusive, n.links[flip].Name, n.links[i].Name, before[i], after[i], before, n)
				}
			}
		}
	}
}

func TestDecideProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := range 3000 {
		data := make([]byte, 24)
		for j := range data {
			data[j] = byte(rng.Uint32())
		}
		t.Run(fmt.Sprint(i), func(t *testing.T) { checkNamespace(t, newNamespace(data), uint64(i)) })
		if t.Failed() {
			return
		}
	}
}

func FuzzDecide(f *testing.F) {
	f.Add([]byte{0, 1, 2, 1, 2, 3, 2, 3, 4, 4, 0x04, 0x00, 0x24, 0x64}, uint64(0))
	f.Add([]byte{4, 4, 4, 4, 4, 4, 4, 4, 4, 3, 0x24, 0x04, 0x44, 0x08}, uint64(7))
	f.Fuzz(func(t *testing.T, data []byte, seed uint64) {
		checkNamespace(t, newNamespace(data), seed)
	})
}
