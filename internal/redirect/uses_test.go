package redirect

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

func TestPlanReservation(t *testing.T) {
	now := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	res := func(holder string, quota int64, expiresIn time.Duration) linkv1.UseReservation {
		return linkv1.UseReservation{Holder: holder, Quota: quota, ExpiresAt: metav1.NewMicroTime(now.Add(expiresIn))}
	}
	limit := func(n int64) *int64 { return &n }
	tests := []struct {
		name         string
		uses         int64
		reservations []linkv1.UseReservation
		maxUses      *int64
		held, served int64
		want         reservationPlan
	}{
		{name: "first reservation", maxUses: limit(40),
			want: reservationPlan{free: 40}},
		{name: "our report moves served uses from our quota to uses", uses: 5, maxUses: limit(40),
			reservations: []linkv1.UseReservation{res("me", 10, time.Minute)}, held: 10, served: 4,
			want: reservationPlan{uses: 9, mine: 6, free: 25}},
		{name: "others' live quota is not free", uses: 5, maxUses: limit(40),
			reservations: []linkv1.UseReservation{res("a", 20, time.Minute), res("me", 10, time.Minute)}, held: 10,
			want: reservationPlan{uses: 5, mine: 10, free: 5, others: []linkv1.UseReservation{res("a", 20, time.Minute)}, busyUntil: now.Add(time.Minute + 10*time.Second)}},
		{name: "a reservation lapsed beyond the grace period counts as used", uses: 5, maxUses: limit(40),
			reservations: []linkv1.UseReservation{res("dead", 20, -11*time.Second)},
			want:         reservationPlan{uses: 25, forfeited: 20, free: 15}},
		{name: "a reservation lapsed within the grace period is its holder's to renew", uses: 5, maxUses: limit(40),
			reservations: []linkv1.UseReservation{res("late", 20, -time.Second)},
			want:         reservationPlan{uses: 5, free: 15, others: []linkv1.UseReservation{res("late", 20, -time.Second)}, busyUntil: now.Add(9 * time.Second)}},
		{name: "our own reservation taken back while we were cut off: nothing counted twice", uses: 30, maxUses: limit(40),
			held: 10, served: 3,
			want: reservationPlan{uses: 30, lost: true, free: 10}},
		{name: "the API never holds more for us than we believe", uses: 0, maxUses: limit(40),
			reservations: []linkv1.UseReservation{res("me", 12, time.Minute)}, held: 8, served: 2,
			want: reservationPlan{uses: 2, mine: 6, free: 32}},
		{name: "nothing free at the limit", uses: 40, maxUses: limit(40),
			want: reservationPlan{uses: 40}},
		{name: "unlimited: a report only", uses: 7, served: 3,
			want: reservationPlan{uses: 10}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := &linkv1.ShortLinkStatus{Uses: tc.uses, UseReservations: tc.reservations}
			got := planReservation(st, tc.maxUses, "me", tc.held, tc.served, now, 10*time.Second)
			if got.uses != tc.want.uses || got.mine != tc.want.mine || got.free != tc.want.free ||
				got.forfeited != tc.want.forfeited || got.lost != tc.want.lost || !got.busyUntil.Equal(tc.want.busyUntil) ||
				len(got.others) != len(tc.want.others) {
				t.Errorf("planReservation = %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

// The request path of a limited link: atomics only, bounded by the lease.
func TestUseCounterTake(t *testing.T) {
	c := &useCounter{}
	now := time.Now().UnixNano()
	if c.take(now) {
		t.Fatal("served without quota")
	}
	c.quota.Store(2)
	c.leaseEnd.Store(now + int64(time.Second))
	for i := range 2 {
		if !c.take(now) {
			t.Fatalf("did not serve use %d of its quota of 2", i+1)
		}
	}
	if c.take(now) {
		t.Fatal("served beyond its quota")
	}
	c.quota.Store(1)
	if c.take(now + int64(time.Second)) {
		t.Fatal("served after its lease ended")
	}
}

func TestCountingDoesNotAllocate(t *testing.T) {
	u := NewUses(UsesOptions{})
	c := &useCounter{}
	if n := testing.AllocsPerRun(1000, func() { u.count(c) }); n != 0 {
		t.Errorf("count allocates %v times per use", n)
	}
}

func TestNextBlock(t *testing.T) {
	u := NewUses(UsesOptions{FlushInterval: 10 * time.Second, MaxBlock: 8})
	now := time.Now()
	c := &useCounter{}
	if got := u.nextBlock(c, now); got != 1 {
		t.Errorf("first block = %d, want 1", got)
	}
	c.block, c.lastGrant = 4, now.Add(-time.Second)
	if got := u.nextBlock(c, now); got != 8 {
		t.Errorf("block used up in 1s = %d, want 8 (doubled)", got)
	}
	c.block = 8
	if got := u.nextBlock(c, now); got != 8 {
		t.Errorf("block at the cap = %d, want 8", got)
	}
	c.block, c.lastGrant = 4, now.Add(-15*time.Second)
	if got := u.nextBlock(c, now); got != 4 {
		t.Errorf("block used up in 15s = %d, want 4 (kept)", got)
	}
	c.lastGrant = now.Add(-time.Minute)
	if got := u.nextBlock(c, now); got != 2 {
		t.Errorf("block used up in a minute = %d, want 2 (halved)", got)
	}
}
