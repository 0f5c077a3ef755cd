package controllers

import (
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
//   - They are not lowered by observation. An expectation the cache already
//     shows only repeats the cache, so it is harmless; it ends when it times
//     out (codeExpectationsTimeout), when the link's next decision replaces
//     it (lockedExpect) or when the link is deleted (deleteExpectations, as
//     DeleteExpectations is called for a deleted ReplicaSet).
//   - An expectation is set by the link that decided but read by every link
//     of its namespace that wants the code; a ReplicaSet's expectations are
//     read only by that ReplicaSet's own sync.
type codeExpectations struct {
	mu     sync.Mutex
	byCode map[nsCode]map[string]codeExpectation // namespace/code -> link name -> expectation
	byLink map[types.NamespacedName]nsCode
	queue  []expectationRef // in decision order, for the timeout
}

type nsCode struct{ namespace, code string }

// codeExpectation is one decision: the link as decided, and when.
type codeExpectation struct {
	link claim.Link
	at   time.Time
}

type expectationRef struct {
	link types.NamespacedName
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
// replacing the link's earlier expectation. Callers hold mu.
func (e *codeExpectations) lockedExpect(key types.NamespacedName, link claim.Link, now time.Time) {
	if e.byCode == nil {
		e.byCode = make(map[nsCode]map[string]codeExpectation)
		e.byLink = make(map[types.NamespacedName]nsCode)
	}
	e.lockedDeleteExpectations(key)
	e.lockedExpire(now)
	if link.Held == "" {
		return
	}
	k := nsCode{key.Namespace, link.Held}
	if e.byCode[k] == nil {
		e.byCode[k] = make(map[string]codeExpectation)
	}
	e.byCode[k][key.Name] = codeExpectation{link: link, at: now}
	e.byLink[key] = k
	e.queue = append(e.queue, expectationRef{link: key, at: now})
}

// deleteExpectations drops the expectation of a link (it was deleted).
func (e *codeExpectations) deleteExpectations(key types.NamespacedName) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.lockedDeleteExpectations(key)
}

func (e *codeExpectations) lockedDeleteExpectations(key types.NamespacedName) {
	k, ok := e.byLink[key]
	if !ok {
		return
	}
	delete(e.byLink, key)
	delete(e.byCode[k], key.Name)
	if len(e.byCode[k]) == 0 {
		delete(e.byCode, k)
	}
}

// lockedExpire drops the expectations older than codeExpectationsTimeout.
// Callers hold mu.
func (e *codeExpectations) lockedExpire(now time.Time) {
	n := 0
	for ; n < len(e.queue) && now.Sub(e.queue[n].at) > codeExpectationsTimeout; n++ {
		ref := e.queue[n]
		if k, ok := e.byLink[ref.link]; ok {
			if exp := e.byCode[k][ref.link.Name]; !exp.at.After(ref.at) {
				e.lockedDeleteExpectations(ref.link)
			}
		}
	}
	e.queue = e.queue[n:]
}
