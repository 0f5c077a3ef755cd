package uses

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

func TestPlanReservation(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	const lease, grace = 30 * time.Second, 10 * time.Second
	res := func(holder string, quota int64, expiresIn time.Duration) linkv1.UseReservation {
		return linkv1.UseReservation{Holder: holder, Quota: quota, ExpiresAt: metav1.NewMicroTime(now.Add(expiresIn))}
	}
	seenFor := func(holder string, expiresIn, ago time.Duration) map[string]Observation {
		return map[string]Observation{holder: {ExpiresAt: now.Add(expiresIn), Since: now.Add(-ago)}}
	}
	limit := func(n int64) *int64 { return &n }
	tests := []struct {
		name         string
		uses         int64
		reservations []linkv1.UseReservation
		seen         map[string]Observation
		maxUses      *int64
		held, served int64
		want         Plan
		wantSeen     int
	}{
		{name: "first reservation", maxUses: limit(40),
			want: Plan{Free: 40}},
		{name: "our report moves served uses from our quota to uses", uses: 5, maxUses: limit(40),
			reservations: []linkv1.UseReservation{res("me", 10, time.Minute)}, held: 10, served: 4,
			want: Plan{Uses: 9, Mine: 6, Free: 25}},
		{name: "others' live quota is not free; first seen now", uses: 5, maxUses: limit(40),
			reservations: []linkv1.UseReservation{res("a", 20, time.Minute), res("me", 10, time.Minute)}, held: 10,
			want:     Plan{Uses: 5, Mine: 10, Free: 5, Others: []linkv1.UseReservation{res("a", 20, time.Minute)}, BusyUntil: now.Add(lease + grace)},
			wantSeen: 1},
		{name: "a reservation seen unchanged for a lease plus the grace is taken back, whatever its expiresAt says", uses: 5, maxUses: limit(40),
			reservations: []linkv1.UseReservation{res("dead", 20, time.Hour)}, seen: seenFor("dead", time.Hour, lease+grace),
			want: Plan{Uses: 25, Forfeited: 20, Free: 15}},
		{name: "an expiresAt in the past is not enough: skewed clocks", uses: 5, maxUses: limit(40),
			reservations: []linkv1.UseReservation{res("skewed", 20, -time.Hour)},
			want:         Plan{Uses: 5, Free: 15, Others: []linkv1.UseReservation{res("skewed", 20, -time.Hour)}, BusyUntil: now.Add(lease + grace)},
			wantSeen:     1},
		{name: "a renewed reservation is seen afresh", uses: 5, maxUses: limit(40),
			reservations: []linkv1.UseReservation{res("a", 20, time.Minute)}, seen: seenFor("a", time.Second, lease+grace),
			want:     Plan{Uses: 5, Free: 15, Others: []linkv1.UseReservation{res("a", 20, time.Minute)}, BusyUntil: now.Add(lease + grace)},
			wantSeen: 1},
		{name: "seen a while: busy until a lease plus grace after the first sight", uses: 5, maxUses: limit(40),
			reservations: []linkv1.UseReservation{res("a", 20, time.Minute)}, seen: seenFor("a", time.Minute, 25*time.Second),
			want:     Plan{Uses: 5, Free: 15, Others: []linkv1.UseReservation{res("a", 20, time.Minute)}, BusyUntil: now.Add(lease + grace - 25*time.Second)},
			wantSeen: 1},
		{name: "our own reservation taken back while we were cut off: nothing counted twice", uses: 30, maxUses: limit(40),
			held: 10, served: 3,
			want: Plan{Uses: 30, Lost: true, Free: 10}},
		{name: "the API never holds more for us than we believe", uses: 0, maxUses: limit(40),
			reservations: []linkv1.UseReservation{res("me", 12, time.Minute)}, held: 8, served: 2,
			want: Plan{Uses: 2, Mine: 6, Free: 32}},
		{name: "a lowered limit shrinks our reservation to what fits", uses: 20, maxUses: limit(30),
			reservations: []linkv1.UseReservation{res("a", 8, time.Minute), res("me", 10, time.Minute)}, held: 10, served: 1,
			want:     Plan{Uses: 21, Mine: 1, Shrunk: 8, Others: []linkv1.UseReservation{res("a", 8, time.Minute)}, BusyUntil: now.Add(lease + grace)},
			wantSeen: 1},
		{name: "a limit below what others hold leaves us nothing", uses: 20, maxUses: limit(21),
			reservations: []linkv1.UseReservation{res("a", 8, time.Minute), res("me", 10, time.Minute)}, held: 10,
			want:     Plan{Uses: 20, Mine: 0, Shrunk: 10, Others: []linkv1.UseReservation{res("a", 8, time.Minute)}, BusyUntil: now.Add(lease + grace)},
			wantSeen: 1},
		{name: "nothing free at the limit", uses: 40, maxUses: limit(40),
			want: Plan{Uses: 40}},
		{name: "unlimited: a report only", uses: 7, served: 3,
			want: Plan{Uses: 10}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := &linkv1.ShortLinkStatus{Uses: tc.uses, UseReservations: tc.reservations}
			got := PlanReservation(PlanInput{Status: st, MaxUses: tc.maxUses, Holder: "me", Held: tc.held, Served: tc.served,
				Now: now, Lease: lease, Grace: grace, Seen: tc.seen})
			if got.Uses != tc.want.Uses || got.Mine != tc.want.Mine || got.Free != tc.want.Free || got.Shrunk != tc.want.Shrunk ||
				got.Forfeited != tc.want.Forfeited || got.Lost != tc.want.Lost || !got.BusyUntil.Equal(tc.want.BusyUntil) ||
				len(got.Others) != len(tc.want.Others) || len(got.Seen) != tc.wantSeen {
				t.Errorf("PlanReservation = %+v\nwant %+v (seen %d)", got, tc.want, tc.wantSeen)
			}
		})
	}
}

func TestGrant(t *testing.T) {
	for _, tc := range []struct {
		free   int64
		others int
		block  int64
		want   int64
	}{
		{free: 100, block: 8, want: 8},
		{free: 100, block: 1000, want: 50},
		{free: 100, others: 1, block: 1000, want: 25},
		{free: 1, others: 3, block: 1000, want: 1},
		{free: 0, block: 1000, want: 0},
	} {
		p := Plan{Free: tc.free, Others: make([]linkv1.UseReservation, tc.others)}
		if got := Grant(p, tc.block); got != tc.want {
			t.Errorf("Grant(free %d, %d others, block %d) = %d, want %d", tc.free, tc.others, tc.block, got, tc.want)
		}
	}
}

// The request path of a limited link: atomics only, bounded by the lease.
func TestCounterTake(t *testing.T) {
	l := (&Counter{}).lim()
	now := int64(time.Hour)
	if l.take(now) {
		t.Fatal("served without quota")
	}
	l.quota.Store(2)
	l.leaseEnd.Store(now + int64(time.Second))
	for i := range 2 {
		if !l.take(now) {
			t.Fatalf("did not serve use %d of its quota of 2", i+1)
		}
	}
	if l.take(now) {
		t.Fatal("served beyond its quota")
	}
	l.quota.Store(1)
	if l.take(now + int64(time.Second)) {
		t.Fatal("served after its lease ended")
	}
}

func TestCountingDoesNotAllocate(t *testing.T) {
	u := New(Options{})
	c := &Counter{}
	if n := testing.AllocsPerRun(1000, func() { u.Count(c) }); n != 0 {
		t.Errorf("Count allocates %v times per use", n)
	}
}

func TestNextBlock(t *testing.T) {
	u := New(Options{FlushInterval: 10 * time.Second, MaxBlock: 8}) // a lease of a minute
	now := time.Now()
	c := &Counter{}
	l := c.lim()
	if got := u.nextBlock(c, now); got != 1 {
		t.Errorf("first block = %d, want 1", got)
	}
	l.block, l.lastGrant = 4, now.Add(-time.Second)
	if got := u.nextBlock(c, now); got != 8 {
		t.Errorf("block used up in 1s = %d, want 8 (doubled)", got)
	}
	l.block = 8
	if got := u.nextBlock(c, now); got != 8 {
		t.Errorf("block at the cap = %d, want 8", got)
	}
	l.block, l.lastGrant = 4, now.Add(-50*time.Second)
	if got := u.nextBlock(c, now); got != 8 {
		t.Errorf("block used up in 50s, within a lease = %d, want 8 (doubled: a link clicked every 20s needs more than a round's worth)", got)
	}
	l.block, l.lastGrant = 4, now.Add(-90*time.Second)
	if got := u.nextBlock(c, now); got != 4 {
		t.Errorf("block used up in 90s = %d, want 4 (kept)", got)
	}
	l.lastGrant = now.Add(-3 * time.Minute)
	if got := u.nextBlock(c, now); got != 2 {
		t.Errorf("block used up in 3 minutes = %d, want 2 (halved)", got)
	}
}
