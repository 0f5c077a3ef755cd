package controllers

import (
	"slices"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/linkforge/linkforge/internal/claim"
)

// codeExpectationsTimeout is how long an expectation is kept: far longer than
// the cache needs to show the status write that carried the decision. It
// plays the part of ExpectationsTimeout in Kubernetes' controller utilities.
const codeExpectationsTimeout = 10 * time.Second

// codeExpectations are the code decisions this manager has just written but
// its informer cache may not show yet: the expectations pattern of
// Kubernetes' own controllers (ControllerExpectations in
// k8s.io/kubernetes/pkg/controller, used by the ReplicaSet, Job and DaemonSet
// controllers). Decisions are taken one at a time under mu, so two workers (or
// one worker whose cache is a moment behind its own write) never give one
// code to two targets.
//
// The ReplicaSet controller counts the pod creations and deletions it has
// issued (ExpectCreations, ExpectDeletions), lowers the counts as the
// informer reports them (CreationObserved, DeletionObserved) and skips a sync
// until SatisfiedExpectations, so that it does not act twice on a stale pod
// list. codeExpectations differ in three ways:
//
//   - They remember the decision itself (which link holds which code in
//     which namespace), not a count, and a decision does not wait for them:
//     each expectation is added to the cache's view of the namespace as one
//     more holder of its code (lockedExpectedHolders), so the next decision
//     is taken on the cache plus what it is known to be missing.
//   - They are not lowered by observation of other links. An expectation the
//     cache already shows only repeats the cache, so it is harmless. A
//     link's expectation ends when it times out (codeExpectationsTimeout),
//     when the link is deleted (deleteExpectations, as DeleteExpectations is
//     called for a deleted ReplicaSet), when a later write of the link has
//     succeeded (written), or at the link's next decision: if it was never
//     written (the write failed, or there was nothing to write), or if it
//     was and the cache now shows that write. A written decision the cache
//     does not show yet outlives later decisions that were not written: a
//     decision taken on a stale copy fails on the optimistic lock while the
//     API server shows the earlier write, whose code is still held.
//   - An expectation is set by the link that decided but read by every link
//     of its namespace that wants the code; a ReplicaSet's expectations are
//     read only by that ReplicaSet's own sync.
type codeExpectations struct {
	mu     sync.Mutex
	byCode map[nsCode]map[string]codeExpectation // namespace/code -> link name -> expectation
	byLink map[types.NamespacedName][]string     // link -> the codes it is expected to hold
	queue  []expectationRef                      // in decision order, for the timeout
}

type nsCode struct{ namespace, code string }

// codeExpectation is one decision: the link as decided, and when. Once its
// status write has succeeded, written is set and baseRV is the
// resourceVersion the write replaced: the cache shows the write (or later)
// once it shows the link at another resourceVersion.
type codeExpectation struct {
	link    claim.Link
	at      time.Time
	written bool
	baseRV  string
}

type expectationRef struct {
	link types.NamespacedName
	code string
	at   time.Time
}

// lockedExpectedHolders adds to rivals the links expected to hold codes in
// namespace, which the cache may not show yet. An expectation is added beside
// the cached view of its link, not in its place: the code the cache still
// shows is released only once the write that released it has reached the API
// server and come back through the cache. Callers hold mu.
func (e *codeExpectations) lockedExpectedHolders(namespace string, codes []string, rivals []claim.Link, now time.Time) []claim.Link {
	for _, code := range codes {
		for _, exp := range e.byCode[nsCode{namespace, code}] {
			if now.Sub(exp.at) <= codeExpectationsTimeout {
				rivals = append(rivals, exp.link)
			}
		}
	}
	return rivals
}

// lockedExpect records link's decision (Held empty: it holds nothing),
// taken on the cached copy at resourceVersion cachedRV, which shows the link
// as cached. The link's earlier expectations end here, but for a written one
// the cache does not show yet. A decision the cached copy already shows is
// not recorded: it would only repeat the cache, which every decision reads,
// and a burst of new links would keep one per link for
// codeExpectationsTimeout (each link's status write comes back through the
// cache and is decided again, as it was written). Callers hold mu.
func (e *codeExpectations) lockedExpect(key types.NamespacedName, link, cached claim.Link, cachedRV string, now time.Time) {
	if e.byCode == nil {
		e.byCode = make(map[nsCode]map[string]codeExpectation)
		e.byLink = make(map[types.NamespacedName][]string)
	}
	for _, code := range slices.Clone(e.byLink[key]) {
		if exp := e.byCode[nsCode{key.Namespace, code}][key.Name]; !exp.written || exp.baseRV != cachedRV {
			e.lockedDeleteExpectation(key, code)
		}
	}
	e.lockedExpire(now)
	if link.Held == "" || link == cached {
		return
	}
	k := nsCode{key.Namespace, link.Held}
	if e.byCode[k] == nil {
		e.byCode[k] = make(map[string]codeExpectation)
	}
	exp := codeExpectation{link: link, at: now}
	if earlier, ok := e.byCode[k][key.Name]; !ok {
		e.byLink[key] = append(e.byLink[key], link.Held)
	} else {
		// A written decision for the same code the cache does not show yet:
		// the code stays held if this decision's write fails.
		exp.written, exp.baseRV = earlier.written, earlier.baseRV
	}
	e.byCode[k][key.Name] = exp
	e.queue = append(e.queue, expectationRef{link: key, code: link.Held, at: now})
}

// written records that the status write of the link's last decision, which
// holds held (empty: nothing), has succeeded over resourceVersion baseRV.
// The link's other expectations end: the API server no longer shows them,
// and the cache shows them until the write comes back.
func (e *codeExpectations) written(key types.NamespacedName, held, baseRV string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, code := range slices.Clone(e.byLink[key]) {
		k := nsCode{key.Namespace, code}
		if code != held {
			e.lockedDeleteExpectation(key, code)
			continue
		}
		exp := e.byCode[k][key.Name]
		exp.written, exp.baseRV = true, baseRV
		e.byCode[k][key.Name] = exp
	}
}

// deleteExpectations drops the expectations of a link (it was deleted).
func (e *codeExpectations) deleteExpectations(key types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	for _, code := range slices.Clone(e.byLink[key]) {
		e.lockedDeleteExpectation(key, code)
	}
}

func (e *codeExpectations) lockedDeleteExpectation(key types.NamespacedName, code string) {
	k := nsCode{key.Namespace, code}
	if _, ok := e.byCode[k][key.Name]; !ok {
		return
	}
	delete(e.byCode[k], key.Name)
	if len(e.byCode[k]) == 0 {
		delete(e.byCode, k)
	}
	codes := slices.DeleteFunc(e.byLink[key], func(c string) bool { return c == code })
	if len(codes) == 0 {
		delete(e.byLink, key)
	} else {
		e.byLink[key] = codes
	}
}

// lockedExpire drops the expectations older than codeExpectationsTimeout.
// Callers hold mu.
func (e *codeExpectations) lockedExpire(now time.Time) {
	n := 0
	for ; n < len(e.queue) && now.Sub(e.queue[n].at) > codeExpectationsTimeout; n++ {
		ref := e.queue[n]
		exp, ok := e.byCode[nsCode{ref.link.Namespace, ref.code}][ref.link.Name]
		if ok && !exp.at.After(ref.at) {
			e.lockedDeleteExpectation(ref.link, ref.code)
		}
	}
	e.queue = e.queue[n:]
}

// expire drops the expectations older than codeExpectationsTimeout, and the
// maps' memory once none is left: decisions expire others only as they are
// taken, so after a burst of new links the last ones' expectations (and the
// maps at their peak size) would stay until the next decision.
func (e *codeExpectations) expire(now time.Time) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lockedExpire(now)
	if len(e.queue) == 0 {
		e.byCode, e.byLink, e.queue = nil, nil, nil
	}
}
