package uses

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

// writeCount writes the pending uses of an unlimited link: a merge patch of
// status.uses on the version the informer showed last, with its
// resourceVersion as precondition, so no read precedes the common write;
// a conflict retries on a live read. c's lock is held. A write whose
// response is lost is counted again (status.uses may read high by it).
func (u *Uses) writeCount(ctx context.Context, c *Counter, mode budgetMode) error {
	v, ok := c.version()
	if !ok {
		return errLinkGone
	}
	rv, base, baseSplit, basePreviews := v.ResourceVersion, v.StatusUses, v.VariantUses, v.StatusPreviewerFetches
	var lastUsed *metav1.Time
	if v.StatusLastUsed > 0 {
		t := metav1.Unix(v.StatusLastUsed, 0)
		lastUsed = &t
	}
	for attempt := 0; attempt < maxWriteAttempts; attempt++ {
		served := c.pending.Swap(0)
		if served == 0 {
			return u.writeTallies(ctx, c, mode) // previewer fetches alone
		}
		if !u.spend(ctx, mode) {
			c.pending.Add(served)
			return errNoBudget
		}
		// Taken after the swap: every use of this batch was served before
		// it, and so was every split click (counted before its use).
		split := c.takeSplit()
		previews := c.previews.Swap(0)
		at := usedAt(u.opts.Clock(), lastUsed).UTC().Format(time.RFC3339)
		err := u.patchOn(ctx, v, rv, `"uses":`+strconv.FormatInt(base+served, 10)+`,"lastUsedAt":"`+at+`"`+variantUsesField(&split, baseSplit)+previewsField(previews, basePreviews))
		switch {
		case err == nil:
			return nil
		case apierrors.IsConflict(err):
			c.pending.Add(served)
			c.previews.Add(previews)
			split.putBack()
			live, err := u.readLive(ctx, c, v.key())
			if err != nil {
				return err
			}
			rv, base, lastUsed, baseSplit, basePreviews = live.ResourceVersion, live.Status.Uses, live.Status.LastUsedAt, live.Status.VariantUses, live.Status.PreviewerFetches
		case errors.Is(err, errLinkGone):
			return err
		default:
			c.pending.Add(served)
			c.previews.Add(previews)
			split.putBack()
			return err
		}
	}
	return lostRaces(c)
}

// previewsField is the status.previewerFetches member of a count write's
// patch (with its leading comma), or "" when it has none to report.
func previewsField(previews, base int64) string {
	if previews == 0 {
		return ""
	}
	return `,"previewerFetches":` + strconv.FormatInt(base+previews, 10)
}

// patchOn sends a merge patch of the link's status members (fields, a JSON
// object's members) with resourceVersion rv as its precondition, and counts
// the write: errLinkGone when the link is gone, the API server's error
// (a conflict among them) else.
func (u *Uses) patchOn(ctx context.Context, v LinkVersion, rv, fields string) error {
	patch := []byte(`{"metadata":{"resourceVersion":` + strconv.Quote(rv) + `},"status":{` + fields + `}}`)
	obj := &linkv1.ShortLink{ObjectMeta: metav1.ObjectMeta{Namespace: v.Namespace, Name: v.Name}}
	err := u.opts.Client.Status().Patch(ctx, obj, client.RawPatch(types.MergePatchType, patch))
	switch {
	case err == nil:
		u.metrics.writes.WithLabelValues("ok").Inc()
	case apierrors.IsConflict(err):
		u.metrics.writes.WithLabelValues("conflict").Inc()
	case apierrors.IsNotFound(err):
		return errLinkGone
	default:
		u.metrics.writes.WithLabelValues(resultError).Inc()
	}
	return err
}

// readLive reads c's link (key) live: errLinkGone when it was deleted or
// replaced by another of the same name.
func (u *Uses) readLive(ctx context.Context, c *Counter, key types.NamespacedName) (*linkv1.ShortLink, error) {
	live := &linkv1.ShortLink{}
	if err := u.opts.Client.Get(ctx, key, live); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, errLinkGone
		}
		return nil, err
	}
	if UIDKey(live.UID) != c.uid() {
		return nil, errLinkGone
	}
	return live, nil
}

// writeTallies writes what c counted beside uses, alone: its split clicks
// (status.variantUses) for the clicks this replica forwarded (their holder
// writes the uses, so nothing else here would carry them), and its
// previewer fetches (status.previewerFetches), which are not uses and so
// never ride on a reservation's write. A merge patch on the version the
// informer showed, a conflict retrying on a live read, as writeCount. c's
// lock is held.
func (u *Uses) writeTallies(ctx context.Context, c *Counter, mode budgetMode) error {
	v, ok := c.version()
	if !ok {
		return errLinkGone
	}
	if !c.splitPending() && c.previews.Load() == 0 {
		return nil
	}
	if !u.spend(ctx, mode) {
		return errNoBudget
	}
	rv, baseSplit, basePreviews := v.ResourceVersion, v.VariantUses, v.StatusPreviewerFetches
	split, previews := c.takeSplit(), c.previews.Swap(0)
	putBack := func() {
		split.putBack()
		c.previews.Add(previews)
	}
	for attempt := 0; attempt < maxWriteAttempts; attempt++ {
		fields := variantUsesField(&split, baseSplit) + previewsField(previews, basePreviews)
		if fields == "" {
			return nil
		}
		err := u.patchOn(ctx, v, rv, fields[1:])
		switch {
		case err == nil:
			return nil
		case apierrors.IsConflict(err):
			live, err := u.readLive(ctx, c, v.key())
			if err != nil {
				putBack()
				return err
			}
			rv, baseSplit, basePreviews = live.ResourceVersion, live.Status.VariantUses, live.Status.PreviewerFetches
		case errors.Is(err, errLinkGone):
			return err
		default:
			putBack()
			return err
		}
	}
	putBack()
	return lostRaces(c)
}

// variantUsesField is the status.variantUses member of a count write's
// patch (with its leading comma), or "" when it has none to set.
func variantUsesField(split *splitTaken, base []linkv1.VariantUses) string {
	vu, set := split.variantUses(base)
	if !set {
		return ""
	}
	if vu == nil {
		return `,"variantUses":null`
	}
	b, err := json.Marshal(vu)
	if err != nil { // not for these types
		return ""
	}
	return `,"variantUses":` + string(b)
}

// flushOne writes what c has to write: its pending uses, and for a held
// reservation a renewal, or the return of its unused quota when it served
// nothing since the last write (idle) or release is set.
func (u *Uses) flushOne(ctx context.Context, c *Counter, release bool, mode budgetMode) error {
	if !u.lock(ctx, c) {
		return ctx.Err()
	}
	defer u.unlock(c)
	err := u.flushLocked(ctx, c, release, mode)
	if err == nil && c.previews.Load() != 0 {
		// A limited link's previewer fetches (an unlimited link's went
		// with its uses, or alone, in writeCount).
		err = u.writeTallies(ctx, c, mode)
	}
	return err
}

// flushLocked is flushOne's writes of uses, split clicks and
// reservations; c's lock is held.
func (u *Uses) flushLocked(ctx context.Context, c *Counter, release bool, mode budgetMode) error {
	v, _ := c.version()
	l := c.limit.Load() // nil: no limit, no reservation, ever
	switch {
	case l != nil && l.held > 0:
		pending := c.pending.Load()
		inUse := pending > l.deferred // served since the last round
		if l.ahead && (inUse || !u.opts.Clock().Before(l.aheadUntil)) {
			u.endAhead(c) // used, or no longer new: held as any other
		}
		if inUse {
			l.quietRounds = 0
		} else if !release {
			l.quietRounds++
			// Quiet for a lease: the quota goes back to the others, unless
			// it was reserved ahead of the first click of a new link.
			release = l.quietRounds >= u.quietRounds() && !l.ahead
		}
		if !release && u.deferWrite(c, l, v) {
			l.deferred = pending
			return nil
		}
		// A reservation used since its last write is topped up in the same
		// write: its next clicks are served from quota, not from a
		// reservation each.
		_, err := u.writeReservation(ctx, c, pending > 0 && !release, release, mode)
		if l.held == 0 || errors.Is(err, errLinkGone) {
			u.endAhead(c)
		}
		return err
	case v.MaxUses > 0 || l != nil && l.unconfirmed != nil:
		if c.pending.Load() == 0 && (l == nil || l.unconfirmed == nil) {
			return u.writeTallies(ctx, c, mode) // forwarded clicks' split counts, previewer fetches
		}
		_, err := u.writeReservation(ctx, c, false, release, mode)
		return err
	default:
		return u.writeCount(ctx, c, mode)
	}
}

// deferWrite reports whether a held reservation's write can wait for a
// later round: its lease lasts past the next round, it has quota left, and
// its uses (inside the reservation, so counted by anyone who takes it
// back) can arrive with the renewal, unless the link has an idleTimeout,
// whose lastUsedAt must arrive within the manager's --idle-grace. A link
// in use then costs a write per renewal, not one per round.
func (u *Uses) deferWrite(c *Counter, l *limits, v LinkVersion) bool {
	if l.leaseEnd.Load()-u.mono(u.opts.Clock()) <= int64(u.opts.FlushInterval*3/2) || l.unconfirmed != nil {
		return false
	}
	return c.pending.Load() == 0 || l.quota.Load() > 0 && !v.IdleTimeout
}

// quietRounds is how many flush rounds a reservation serves nothing before
// its replica returns it: a lease's worth. A link clicked less often than
// every round keeps its quota (and costs a renewal every other round, not
// a reservation per click); a link gone quiet gives it back to the others.
func (u *Uses) quietRounds() int {
	return max(1, int(u.opts.Lease/u.opts.FlushInterval))
}

// Flush runs one round: every link with pending uses or a reservation due
// for renewal or return gets at most one write, reservations first in the order their leases end
// (they lapse), then the links in the order they started waiting, as far
// as the write budget allows; the rest wait for the next round. At
// shutdown (final) it writes everything without the budget, until ctx
// ends, and returns every reservation's unused quota. It returns how many
// uses are still pending.
func (u *Uses) Flush(ctx context.Context, final bool) int64 {
	var todo []*Counter
	held := map[*Counter]bool{}
	u.mu.Lock()
	for c := range u.holding {
		todo = append(todo, c)
		held[c] = true
	}
	u.mu.Unlock()
	dueFirst(todo)
	var waiting []*Counter
	for c := u.dirty.Swap(nil); c != nil; {
		next := c.next
		c.next = nil
		c.queued.Store(false)
		waiting = append(waiting, c)
		c = next
	}
	// The stack is newest first.
	slices.Reverse(waiting)
	for _, c := range waiting {
		if !held[c] {
			todo = append(todo, c)
		}
	}

	if final {
		u.releaseAll(ctx, todo)
	} else {
		u.flushRound(ctx, todo)
	}
	var pending int64
	for _, c := range todo {
		if n := c.pending.Load(); n > 0 {
			pending += n
			u.markDirty(c)
		} else if c.splitPending() || c.previews.Load() != 0 {
			u.markDirty(c) // forwarded clicks' split counts (writeTallies), previewer fetches
		}
	}
	u.metrics.pending.Set(float64(pending))
	return pending
}

// flushRound writes todo in order as the budget allows, roundWriters at a
// time: a round may spend the budget of one interval (it waits for tokens
// until the next round is due) and leaves the rest to that round.
func (u *Uses) flushRound(ctx context.Context, todo []*Counter) {
	u.roundEnd = time.Now().Add(u.opts.FlushInterval) // a real deadline for the budget's wait
	var logged sync.Once
	eachAtOnce(ctx, todo, roundWriters, func(c *Counter) (stop bool) {
		err := u.flushWithin(ctx, c, false, budgetRound)
		switch {
		case errors.Is(err, errNoBudget):
			return true
		case err != nil:
			// The API server is unreachable or refusing: the rest of the
			// round would only wait for it too.
			logged.Do(func() {
				u.opts.Log.Info("cannot write uses yet; they wait for the next round", "link", c.name(), "error", err.Error())
			})
			return true
		}
		return false
	})
}

// roundWriters is how many writes a flush round, and the returns another
// replica asked for, have in flight at once. A write is a live read and a
// patch: one at a time, an API server that takes 250 ms a request under
// load allows two writes a second, fewer than the renewals of 25 links
// with a 6 s lease need, and the leases lapse (another replica then takes
// them back, counted as used, though this one is alive). Eight at a time
// keep the budget (--uses-writes-per-second, 20) the limit up to 400 ms a
// request; the budget's pace still spaces their starts.
const roundWriters = 8

// eachAtOnce calls write for each of todo in order, at most workers at a
// time, and returns when every call has. Once a call returns stop (no
// budget left, the API server failing), or ctx ends, the links not yet
// begun are left for the next round.
func eachAtOnce(ctx context.Context, todo []*Counter, workers int, write func(*Counter) (stop bool)) {
	work := make(chan *Counter)
	var stopped atomic.Bool
	var wg sync.WaitGroup
	for range min(workers, len(todo)) {
		wg.Go(func() {
			for c := range work {
				if !stopped.Load() && write(c) {
					stopped.Store(true)
				}
			}
		})
	}
	for _, c := range todo {
		if ctx.Err() != nil || stopped.Load() {
			break
		}
		work <- c
	}
	close(work)
	wg.Wait()
}

// flushWithin is flushOne within writeTimeout; a link deleted meanwhile is
// forgotten.
func (u *Uses) flushWithin(ctx context.Context, c *Counter, release bool, mode budgetMode) error {
	wctx, cancel := context.WithTimeout(ctx, writeTimeout)
	defer cancel()
	err := u.flushOne(wctx, c, release, mode)
	if errors.Is(err, errLinkGone) {
		c.pending.Store(0)
		c.previews.Store(0)
		u.hold(c, false)
		return nil
	}
	return err
}

// dueFirst orders held counters by the end of their leases, soonest first:
// when the budget is short, the renewals that cannot wait are written.
func dueFirst(held []*Counter) {
	sort.Slice(held, func(i, j int) bool { return held[i].lim().leaseEnd.Load() < held[j].lim().leaseEnd.Load() })
}

// writeTimeout bounds one write of a flush round, so that a hung API
// server holds a link's lock (and the requests waiting for quota) no longer.
const writeTimeout = 10 * time.Second

// Start writes counts every flush interval until ctx ends. The final flush
// is Stop's, once the redirect port no longer serves.
func (u *Uses) Start(ctx context.Context) error {
	if u.opts.ReserveAhead > 0 {
		// Returns after it: no reservation ahead is written after Stop's
		// final flush has taken its list of reservations to return.
		done := make(chan struct{})
		go func() {
			defer close(done)
			u.runAhead(ctx)
		}()
		defer func() { <-done }()
	}
	returns := make(chan struct{})
	go func() {
		defer close(returns)
		u.runReturns(ctx)
	}()
	defer func() { <-returns }()
	t := time.NewTicker(u.opts.FlushInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			u.Flush(ctx, false)
		}
	}
}
