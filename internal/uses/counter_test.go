package uses

import (
	"testing"
	"unsafe"
)

// Every link of a replica has a Counter, limited or not: it holds what
// every link needs in the 64-byte size class, and what a limit needs in
// limits, which only limited links have (the 208-byte class). It was 272
// bytes (the 288-byte class) with the limit in it: most of a plain link's
// memory in the redirector. The sizes are pinned, so that a new field is a
// decision (see redirect's TestPerLinkSizes and docs/performance.md).
func TestCounterSize(t *testing.T) {
	if n := unsafe.Sizeof(Counter{}); n != 64 {
		t.Errorf("Counter is %d bytes, not 64: a field only some links need goes in limits; else update this test and docs/performance.md", n)
	}
	if n := unsafe.Sizeof(limits{}); n != 208 {
		t.Errorf("limits is %d bytes, not 208 (the 208-byte size class): update this test and docs/performance.md", n)
	}
}

// A link without a limit or reservations never pays for limits: not when
// it is attached, counted, written, nor attached again.
func TestUnlimitedLinkHasNoLimits(t *testing.T) {
	api := newFakeAPI(0)
	r := newTestReplica(api, &fakeClock{now: epoch}, "a", 0)
	for range 3 {
		r.u.Count(r.c)
		r.flush(false)
		r.sync()
	}
	if got := api.get().Status.Uses; got != 3 {
		t.Fatalf("status.uses %d after 3 uses written, want 3", got)
	}
	if r.c.limit.Load() != nil {
		t.Error("an unlimited link's counter made limits")
	}
	// A limit added later makes them, before the version is served.
	api.setMaxUses(10)
	r.sync()
	if r.c.limit.Load() == nil {
		t.Error("a link with maxUses has no limits once attached")
	}
}
