package uses

import (
	"context"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/util/wait"
)

func TestLinkLocks(t *testing.T) {
	var l linkLocks
	a, b := &Counter{}, &Counter{}
	ctx := context.Background()
	if !l.lock(ctx, a) {
		t.Fatal("a free lock was not taken")
	}
	// Another link's lock is free while a's is held (striped locks shared
	// one lock among many links).
	for range 1000 {
		c := &Counter{}
		if !l.lock(ctx, c) {
			t.Fatal("another link waited for a's lock")
		}
		l.unlock(c)
	}
	if !l.lock(ctx, b) {
		t.Fatal("b waited for a's lock")
	}
	// The same link's lock waits, and gives up when its context ends.
	short, cancel := context.WithTimeout(ctx, 20*time.Millisecond)
	defer cancel()
	if l.lock(short, a) {
		t.Fatal("a's lock was taken twice")
	}
	got := make(chan bool, 1)
	go func() { got <- l.lock(ctx, a) }()
	waiting := func(context.Context) (bool, error) {
		l.mu.Lock()
		defer l.mu.Unlock()
		return l.m[a].refs == 2, nil
	}
	if err := wait.PollUntilContextTimeout(ctx, time.Millisecond, 10*time.Second, true, waiting); err != nil {
		t.Fatal("the second lock of a never waited")
	}
	select {
	case <-got:
		t.Fatal("a's lock was taken while held")
	default:
	}
	l.unlock(a)
	if !<-got {
		t.Fatal("a waiter did not get a's lock once released")
	}
	l.unlock(a)
	l.unlock(b)
	if n := len(l.m); n != 0 {
		t.Fatalf("%d locks kept after every link was unlocked, want none", n)
	}
}
