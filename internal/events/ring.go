package events

import (
	"sync/atomic"
)

// ring is the hand-off between the request goroutines and the batcher: a
// bounded queue of Records in place, many producers and one consumer
// (Vyukov's bounded MPMC queue, with one consumer). A producer claims a slot
// with one compare-and-swap and copies its Record into it (the bytes in
// use: Record.copyTo); nothing allocates, nothing blocks: when the ring is
// full, offer fails at once.
//
// Each slot's seq says whose turn it is: pos (free for the producer of pos),
// pos+1 (filled, for the consumer), pos+len (free again, for the next lap).
type ring struct {
	slots []ringSlot
	mask  uint64
	_     [56]byte // tail on a cache line of its own: producers write it
	tail  atomic.Uint64
	_     [56]byte
	head  atomic.Uint64 // written by the consumer only; read for depth
}

type ringSlot struct {
	seq atomic.Uint64
	rec Record
}

// newRing returns a ring of at least n slots (a power of two).
func newRing(n int) *ring {
	size := 1
	for size < n {
		size <<= 1
	}
	r := &ring{slots: make([]ringSlot, size), mask: uint64(size - 1)}
	for i := range r.slots {
		r.slots[i].seq.Store(uint64(i))
	}
	return r
}

// offer copies rec into the ring, or reports false when the ring is full.
// It returns the position rec took.
func (r *ring) offer(rec *Record) (uint64, bool) {
	pos := r.tail.Load()
	for {
		s := &r.slots[pos&r.mask]
		switch seq := s.seq.Load(); {
		case seq == pos:
			if r.tail.CompareAndSwap(pos, pos+1) {
				rec.copyTo(&s.rec)
				s.seq.Store(pos + 1)
				return pos, true
			}
			pos = r.tail.Load()
		case int64(seq-pos) < 0:
			return 0, false // the slot still holds a record of the last lap
		default:
			pos = r.tail.Load() // another producer took pos
		}
	}
}

// peek returns the next record for the consumer, or nil when there is none
// yet. The record stays the consumer's until release.
func (r *ring) peek() *Record {
	head := r.head.Load()
	s := &r.slots[head&r.mask]
	if s.seq.Load() != head+1 {
		return nil
	}
	return &s.rec
}

// release hands the slot peek returned back to the producers.
func (r *ring) release() {
	head := r.head.Load()
	r.slots[head&r.mask].seq.Store(head + uint64(len(r.slots)))
	r.head.Store(head + 1)
}

// depth is how many records wait (or are being written).
func (r *ring) depth() int {
	return int(r.tail.Load() - r.head.Load())
}

// taken is how many records the ring has taken since it was made.
func (r *ring) taken() uint64 { return r.tail.Load() }

// capacity is the number of slots.
func (r *ring) capacity() int { return len(r.slots) }
