package uses

import (
	"errors"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

// settle decides whether c's unconfirmed write was applied, from the live
// status: our reservation carries the expiresAt of the last write applied.
func (u *Uses) settle(c *Counter, st *linkv1.ShortLinkStatus, liveMax *int64) {
	l := c.lim()
	w := l.unconfirmed
	l.unconfirmed = nil
	var found time.Time
	for _, res := range st.UseReservations {
		if res.Holder == u.opts.Holder {
			found = res.ExpiresAt.Time
		}
	}
	applied := false
	switch {
	case !w.expires.IsZero() && found.Equal(w.expires):
		applied = true
	case !l.heldExpires.IsZero() && found.Equal(l.heldExpires):
		applied = false
	case found.IsZero() && l.held > 0:
		if w.mine > 0 {
			// Taken back by another replica: its whole quota, the uses
			// of this write included, is counted (the planner sees it
			// lost). Whether this write was applied cannot be told, and
			// does not matter but for what it took back (counted if it
			// was, or again by the next write if it was not).
			u.metrics.settled.WithLabelValues("taken-back").Inc()
			return
		}
		applied = true // the write returned our reservation
	}
	if applied {
		u.metrics.settled.WithLabelValues("applied").Inc()
		u.metrics.forfeited.Add(float64(w.forfeited))
		l.held, l.heldExpires = w.mine, w.expires
		l.quota.Add(max(w.delta, 0))
		if w.mine > 0 {
			// Under the limit it was written with; a lower one since (the
			// informer's, or this read's) stops it until the next write.
			u.startLease(c, w.sent, w.maxUses)
			if liveMax != nil && *liveMax < w.maxUses {
				l.leaseEnd.Store(0)
			}
		} else {
			l.quota.Store(0)
			u.endAhead(c)
		}
		return
	}
	// Not applied, or nothing tells: count its uses again (status.uses
	// may then read high, never low).
	u.metrics.settled.WithLabelValues("not-applied").Inc()
	c.pending.Add(w.served)
	w.split.putBack()
	l.quota.Add(-min(w.delta, 0))
}

// definite reports whether a write's error says the API server did not
// apply it (a 4xx answer), as opposed to a lost or failed response.
func definite(err error) bool {
	var st apierrors.APIStatus
	if !errors.As(err, &st) {
		return false
	}
	code := st.Status().Code
	return code >= 400 && code < 500 && code != 408
}
