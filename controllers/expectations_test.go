package controllers

import (
	"slices"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/linkforge/linkforge/internal/claim"
)

// holders are the links expected to hold code in namespace ns.
func holders(e *codeExpectations, code string, now time.Time) []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	expected := e.lockedExpectedHolders("ns", []string{code}, nil, now)
	names := make([]string, 0, len(expected))
	for _, l := range expected {
		names = append(names, l.Name+"="+l.Held)
	}
	return names
}

func expect(e *codeExpectations, name, code, cachedRV string, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lockedExpect(types.NamespacedName{Namespace: "ns", Name: name}, claim.Link{Name: name, Held: code, Confirmed: code != ""}, claim.Link{Name: name}, cachedRV, now)
}

func expectHolders(t *testing.T, e *codeExpectations, code string, now time.Time, want ...string) {
	t.Helper()
	if got := holders(e, code, now); !slices.Equal(got, want) {
		t.Fatalf("holders of %s: %v, want %v", code, got, want)
	}
}

// TestExpectationsOutliveAnUnwrittenDecision: a link decided code A and
// that write succeeded, but the cache does not show it yet; then it decided
// B, then C, on its stale cached copy, and those writes failed. Until the
// cache shows the write of A (or a later write succeeds), the link is still
// expected to hold A, or another link would be given A while the API server
// shows it held: two targets under one code.
func TestExpectationsOutliveAnUnwrittenDecision(t *testing.T) {
	var e codeExpectations
	young := types.NamespacedName{Namespace: "ns", Name: "young"}
	t0 := time.Now()
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }

	expect(&e, "young", "A", "1", at(0))
	e.written(young, "A", "1") // the API server is at 2; the cache still at 1
	expect(&e, "young", "B", "1", at(1))
	expectHolders(t, &e, "A", at(2), "young=A")
	expectHolders(t, &e, "B", at(2), "young=B")
	expect(&e, "young", "C", "1", at(3)) // B's write failed: B was never held
	expectHolders(t, &e, "A", at(4), "young=A")
	expectHolders(t, &e, "B", at(4))

	// A failed decision for the code already written keeps it held too.
	expect(&e, "young", "A", "1", at(4))
	expect(&e, "young", "C", "1", at(4))
	expectHolders(t, &e, "A", at(4), "young=A")

	// The cache shows the write of A (or later): it speaks for the link.
	expect(&e, "young", "", "2", at(5))
	expectHolders(t, &e, "A", at(6))
	expectHolders(t, &e, "C", at(6))

	// A later successful write ends the earlier written decision at once.
	expect(&e, "young", "D", "2", at(7))
	e.written(young, "D", "2")
	expect(&e, "young", "E", "2", at(8))
	e.written(young, "E", "3")
	expectHolders(t, &e, "D", at(9))
	expectHolders(t, &e, "E", at(9), "young=E")

	// Another manager's write moved the link: its own decision there, not
	// written, ends at its next one (the cache shows the other write).
	expect(&e, "other", "F", "7", at(10))
	expect(&e, "other", "", "8", at(11))
	expectHolders(t, &e, "F", at(12))

	// The timeout and the link's deletion end them too.
	expect(&e, "third", "G", "1", at(13))
	later := at(13).Add(codeExpectationsTimeout + time.Second)
	expect(&e, "fourth", "H", "1", later) // expires what is due
	expectHolders(t, &e, "G", later)
	expectHolders(t, &e, "E", later)
	e.deleteExpectations(types.NamespacedName{Namespace: "ns", Name: "fourth"})
	expectHolders(t, &e, "H", later)
	if len(e.byLink) != 0 || len(e.byCode) != 0 {
		t.Fatalf("left behind: byLink %v, byCode %v", e.byLink, e.byCode)
	}
}

// TestExpectationsExpireWithoutANewDecision: the last expectations of a
// burst go once they are older than the timeout, with no decision after
// them, and the maps are released when none is left.
func TestExpectationsExpireWithoutANewDecision(t *testing.T) {
	var e codeExpectations
	t0 := time.Now()
	expect(&e, "a", "A", "1", t0)
	expect(&e, "b", "B", "1", t0.Add(time.Second))
	e.expire(t0.Add(codeExpectationsTimeout))
	expectHolders(t, &e, "A", t0, "a=A")
	e.expire(t0.Add(codeExpectationsTimeout + time.Millisecond))
	expectHolders(t, &e, "A", t0)
	expectHolders(t, &e, "B", t0, "b=B")
	e.expire(t0.Add(codeExpectationsTimeout + 2*time.Second))
	if e.byCode != nil || e.byLink != nil || e.queue != nil {
		t.Errorf("no expectation left, but the maps are kept: %d codes, %d links, %d queued", len(e.byCode), len(e.byLink), len(e.queue))
	}
}

// TestExpectationsSkipWhatTheCacheShows: a decision the cached copy already
// shows (the link holds that code, confirmed or not, in the cache) is not
// recorded; one that changes the code or its confirmation is. An earlier
// written decision the cache does not show yet outlives either.
func TestExpectationsSkipWhatTheCacheShows(t *testing.T) {
	key := types.NamespacedName{Namespace: "ns", Name: "l"}
	link := func(held string, confirmed bool) claim.Link {
		return claim.Link{Name: "l", Target: "t", Held: held, Confirmed: confirmed}
	}
	t0 := time.Now()
	for _, tc := range []struct {
		name           string
		earlier        string // a written decision of the link the cache does not show (at cachedRV "1"), if any
		cached, decide claim.Link
		want           map[string][]string // code -> holders expected
	}{
		{name: "the cache shows it: not recorded", cached: link("A", true), decide: link("A", true),
			want: map[string][]string{"A": nil}},
		{name: "a new code", cached: link("", false), decide: link("A", false),
			want: map[string][]string{"A": {"l=A"}}},
		{name: "the cached code, now confirmed", cached: link("A", false), decide: link("A", true),
			want: map[string][]string{"A": {"l=A"}}},
		{name: "another code than the cache's", cached: link("A", true), decide: link("B", false),
			want: map[string][]string{"A": nil, "B": {"l=B"}}},
		{name: "the cache shows it, an earlier written decision not yet: that one stays", earlier: "B", cached: link("A", true), decide: link("A", true),
			want: map[string][]string{"A": nil, "B": {"l=B"}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var e codeExpectations
			if tc.earlier != "" {
				expect(&e, "l", tc.earlier, "1", t0)
				e.written(key, tc.earlier, "1")
			}
			e.mu.Lock()
			e.lockedExpect(key, tc.decide, tc.cached, "1", t0.Add(time.Millisecond))
			e.mu.Unlock()
			for code, want := range tc.want {
				expectHolders(t, &e, code, t0.Add(2*time.Millisecond), want...)
			}
		})
	}
}
