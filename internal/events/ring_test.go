package events

import (
	"sync"
	"testing"
)

func TestRingRefusesWhenFull(t *testing.T) {
	r := newRing(3) // rounds up to 4
	if r.capacity() != 4 {
		t.Fatalf("capacity %d, want 4", r.capacity())
	}
	for i := range 4 {
		if _, ok := r.offer(&Record{Time: int64(i + 1)}); !ok {
			t.Fatalf("offer %d refused in a ring with room", i)
		}
	}
	if _, ok := r.offer(&Record{Time: 5}); ok {
		t.Fatal("a full ring took a record")
	}
	if got := r.peek(); got == nil || got.Time != 1 {
		t.Fatalf("peek = %v, want the first record", got)
	}
	r.release()
	if _, ok := r.offer(&Record{Time: 6}); !ok {
		t.Fatal("a ring with a freed slot refused a record")
	}
	var order []int64
	for rec := r.peek(); rec != nil; rec = r.peek() {
		order = append(order, rec.Time)
		r.release()
	}
	if want := []int64{2, 3, 4, 6}; len(order) != len(want) || order[0] != 2 || order[3] != 6 {
		t.Errorf("drained %v, want %v", order, want)
	}
	if r.depth() != 0 {
		t.Errorf("depth %d after draining", r.depth())
	}
}

// TestRingManyProducers: every record a producer got true for is consumed
// once, and only those (run with -race).
func TestRingManyProducers(t *testing.T) {
	const producers, each = 4, 5000
	r := newRing(64)
	var wg sync.WaitGroup
	accepted := make([][]int64, producers)
	for p := range producers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				v := int64(p*each + i + 1)
				if _, ok := r.offer(&Record{Time: v}); ok {
					accepted[p] = append(accepted[p], v)
				}
			}
		}()
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	seen := map[int64]bool{}
	for finished := false; ; {
		for rec := r.peek(); rec != nil; rec = r.peek() {
			if seen[rec.Time] {
				t.Fatalf("record %d consumed twice", rec.Time)
			}
			seen[rec.Time] = true
			r.release()
		}
		if finished {
			break
		}
		select {
		case <-done:
			finished = true // one more pass for the last records
		default:
		}
	}
	n := 0
	for _, vs := range accepted {
		for _, v := range vs {
			if !seen[v] {
				t.Fatalf("accepted record %d never consumed", v)
			}
		}
		n += len(vs)
	}
	if n != len(seen) {
		t.Fatalf("consumed %d records, %d accepted", len(seen), n)
	}
	if n == 0 {
		t.Fatal("no record accepted")
	}
}
