package uses

import (
	"context"
	"sync"
)

// linkLocks are the write locks of links, one per counter, that a waiter
// can give up on when its context ends. A lock exists only while a write
// holds it or waits for it, so idle links cost nothing, and two links never
// wait for each other: a burst of first clicks on distinct links makes its
// reservations side by side. (Striped locks made about half of a burst of
// 100 first clicks wait for another link's round trip.)
type linkLocks struct {
	mu sync.Mutex
	m  map[*Counter]*linkLock
}

type linkLock struct {
	held chan struct{} // capacity 1: full while held
	refs int           // holders and waiters; the lock is dropped at 0
}

// lock takes c's lock, waiting until ctx ends; false if it did not.
func (l *linkLocks) lock(ctx context.Context, c *Counter) bool {
	l.mu.Lock()
	if l.m == nil {
		l.m = map[*Counter]*linkLock{}
	}
	k := l.m[c]
	if k == nil {
		k = &linkLock{held: make(chan struct{}, 1)}
		l.m[c] = k
	}
	k.refs++
	l.mu.Unlock()
	select {
	case k.held <- struct{}{}:
		return true
	case <-ctx.Done():
		l.drop(c, k)
		return false
	}
}

// unlock releases c's lock, which the caller holds.
func (l *linkLocks) unlock(c *Counter) {
	l.mu.Lock()
	k := l.m[c]
	l.mu.Unlock()
	<-k.held
	l.drop(c, k)
}

func (l *linkLocks) drop(c *Counter, k *linkLock) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if k.refs--; k.refs == 0 {
		delete(l.m, c)
	}
}
