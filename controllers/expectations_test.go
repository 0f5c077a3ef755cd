package controllers

import (
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

func expect(e *codeExpectations, name, code string, now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lockedExpect(types.NamespacedName{Namespace: "ns", Name: name}, claim.Link{Name: name, Held: code, Confirmed: code != ""}, now)
}

// TestExpectationsOutliveAnUnwrittenDecision: a link decided code A, and
// that write reached the API server; then it decided B on a stale copy, and
// that write failed. Until a write of a later decision succeeds, the link is
// still expected to hold A, or another link would be given A while the API
// server shows it held (two targets under one code).
func TestExpectationsOutliveAnUnwrittenDecision(t *testing.T) {
	var e codeExpectations
	key := types.NamespacedName{Namespace: "ns", Name: "young"}
	t0 := time.Now()
	expect(&e, "young", "A", t0)
	expect(&e, "young", "B", t0.Add(time.Millisecond)) // its write fails
	if got := holders(&e, "A", t0.Add(2*time.Millisecond)); len(got) != 1 || got[0] != "young=A" {
		t.Fatalf("holders of A after a later, unwritten decision: %v, want [young=A]", got)
	}
	if got := holders(&e, "B", t0.Add(2*time.Millisecond)); len(got) != 1 {
		t.Fatalf("holders of B: %v, want [young=B]", got)
	}

	// The write of B succeeds: A is released (the cache shows it held until
	// that write comes back).
	e.written(key, "B")
	if got := holders(&e, "A", t0.Add(3*time.Millisecond)); len(got) != 0 {
		t.Fatalf("holders of A after B was written: %v", got)
	}
	if got := holders(&e, "B", t0.Add(3*time.Millisecond)); len(got) != 1 {
		t.Fatalf("holders of B after it was written: %v", got)
	}

	// A decision to hold nothing, written, ends them all; so do the timeout
	// and the link's deletion.
	e.written(key, "")
	if got := holders(&e, "B", t0); len(got) != 0 {
		t.Fatalf("holders of B after a write holding nothing: %v", got)
	}
	expect(&e, "young", "C", t0)
	expect(&e, "other", "C", t0.Add(time.Second))
	later := t0.Add(codeExpectationsTimeout + 500*time.Millisecond)
	expect(&e, "third", "D", later) // expires what is due
	if got := holders(&e, "C", later); len(got) != 1 || got[0] != "other=C" {
		t.Fatalf("holders of C after young's expectation timed out: %v, want [other=C]", got)
	}
	e.deleteExpectations(types.NamespacedName{Namespace: "ns", Name: "other"})
	if got := holders(&e, "C", later); len(got) != 0 {
		t.Fatalf("holders of C after other was deleted: %v", got)
	}
	if len(e.byLink) != 1 || len(e.byCode) != 1 {
		t.Fatalf("left behind: byLink %v, byCode %v; want only third", e.byLink, e.byCode)
	}
}
