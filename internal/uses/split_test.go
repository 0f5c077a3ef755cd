package uses

import (
	"slices"
	"strconv"
	"testing"
	"time"
	"unsafe"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

// setSplit changes the link's split destinations, as an edit of its
// spec.variants would.
func (a *fakeAPI) setSplit(urls ...string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rv++
	a.split = urls
	a.link.ResourceVersion = strconv.Itoa(a.rv)
}

// The split clicks of a link ride on the writes of its uses: each
// destination's count arrives in status.variantUses with the uses that
// carried it, in no write of its own; a destination that leaves the spec
// leaves the list, and one that stays keeps its count.
// A click's split count reads one cache line of its splitCounts (see
// there): the struct fills the 128-byte size class, whose objects start on
// a line.
func TestSplitCountsFillTheirSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(splitCounts{}); n != 128 {
		t.Errorf("splitCounts is %d bytes: make it 128 again (its padding), or say why not", n)
	}
}

func TestVariantUsesRideOnUseWrites(t *testing.T) {
	for _, limited := range []bool{false, true} {
		name := "unlimited"
		if limited {
			name = "maxUses"
		}
		t.Run(name, func(t *testing.T) {
			var maxUses int64
			if limited {
				maxUses = 1000
			}
			api := newFakeAPI(maxUses)
			api.setSplit("https://a.example/", "https://b.example/", "https://c.example/")
			clk := &fakeClock{now: epoch}
			r := newTestReplica(api, clk, "r", 0)
			click := func(slot int) {
				t.Helper()
				r.c.CountSplit(slot, 1)
				if !limited {
					r.u.Count(r.c)
					return
				}
				if r.take() != Served {
					t.Fatal("not served")
				}
			}
			patches := func() int { api.mu.Lock(); defer api.mu.Unlock(); return len(api.patches) }

			for _, slot := range []int{0, 0, 0, 1, 1} {
				click(slot)
			}
			before := patches()
			clk.advance(time.Second)
			r.flush(false)
			if limited {
				// A held reservation with quota left reports at its renewal:
				// let the round write it.
				r.flush(true)
			}
			l := api.get()
			want := []linkv1.VariantUses{{URL: "https://a.example/", Uses: 3}, {URL: "https://b.example/", Uses: 2}, {URL: "https://c.example/", Uses: 0}}
			if !slices.Equal(l.Status.VariantUses, want) || l.Status.Uses != 5 {
				t.Fatalf("uses %d, variantUses %v; want 5 and %v", l.Status.Uses, l.Status.VariantUses, want)
			}
			if limited {
				// The round defers the renewal of a reservation with quota
				// left; the release reports the clicks: one write.
				if n := patches(); n != before+1 {
					t.Errorf("%d writes for the clicks, want the release alone: %q", n-before, api.patches[before:])
				}
			} else if n := patches(); n != before+1 {
				t.Errorf("%d writes for 5 clicks, want the one count write: %q", n-before, api.patches[before:])
			}

			// An edit: b leaves, d arrives; a keeps its count.
			api.setSplit("https://a.example/", "https://d.example/")
			r.sync()
			click(1)
			click(0)
			clk.advance(time.Second)
			r.flush(true)
			want = []linkv1.VariantUses{{URL: "https://a.example/", Uses: 4}, {URL: "https://d.example/", Uses: 1}}
			if got := api.get().Status.VariantUses; !slices.Equal(got, want) {
				t.Errorf("after the edit: variantUses %v, want %v", got, want)
			}

			// The variants removed: the next write clears the list.
			api.setSplit()
			r.sync()
			click(-1)
			clk.advance(time.Second)
			r.flush(true)
			if got := api.get().Status.VariantUses; got != nil {
				t.Errorf("without variants: variantUses %v, want none", got)
			}
		})
	}
}

// A write that conflicts keeps the split clicks it carried for the retry:
// none is lost and none counted twice.
func TestVariantUsesSurviveConflicts(t *testing.T) {
	api := newFakeAPI(0)
	api.setSplit("https://a.example/", "https://b.example/")
	clk := &fakeClock{now: epoch}
	r := newTestReplica(api, clk, "r", 0)
	for range 3 {
		r.c.CountSplit(1, 1)
		r.u.Count(r.c)
	}
	api.setSplit("https://a.example/", "https://b.example/") // a new resourceVersion the replica has not seen
	r.flush(false)
	want := []linkv1.VariantUses{{URL: "https://a.example/", Uses: 0}, {URL: "https://b.example/", Uses: 3}}
	if l := api.get(); !slices.Equal(l.Status.VariantUses, want) || l.Status.Uses != 3 {
		t.Errorf("uses %d, variantUses %v; want 3 and %v", l.Status.Uses, l.Status.VariantUses, want)
	}
}

// A click a replica forwards to the holder of the link's quota is counted
// in status.variantUses by the replica that took it, at its next flush
// round, in a write of its own: the holder writes the use and knows
// nothing of the split. Before, the count waited on the forwarding replica
// until it counted a use of its own, which it might never do.
func TestForwardedSplitClicksAreWritten(t *testing.T) {
	api := newFakeAPI(100)
	api.setSplit("https://a.example/", "https://b.example/")
	clk := &fakeClock{now: epoch}
	a := newAheadReplica(api, clk, "a", epoch, nil)
	b := newAheadReplica(api, clk, "b", epoch, &replicaForwarder{to: a})
	a.aheadRound(clk)
	b.sync()
	b.c.CountSplit(1, 1) // as the redirector does, before the use
	if b.take() != Served {
		t.Fatal("b's click was not served")
	}
	if st := api.get().Status; len(st.UseReservations) != 1 || st.UseReservations[0].Holder != "a" {
		t.Fatalf("reservations %+v: want a's alone (b's click forwarded)", st.UseReservations)
	}
	clk.advance(time.Second)
	b.flush(false)
	want := []linkv1.VariantUses{{URL: "https://a.example/", Uses: 0}, {URL: "https://b.example/", Uses: 1}}
	if got := api.get().Status.VariantUses; !slices.Equal(got, want) {
		t.Fatalf("after b's flush round, variantUses %v; want %v", got, want)
	}
	// Written once: a second round has nothing to write.
	writes := len(api.patches)
	b.flush(false)
	if len(api.patches) != writes {
		t.Errorf("a second round wrote again: %q", api.patches[writes:])
	}
	// The holder's release writes the uses; the split counts stay.
	a.flush(true)
	if st := api.get().Status; st.Uses != 1 || !slices.Equal(st.VariantUses, want) {
		t.Errorf("after a's release, uses %d, variantUses %v; want 1 and %v", st.Uses, st.VariantUses, want)
	}
}
