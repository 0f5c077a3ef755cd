package controllers

import (
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"github.com/linkforge/linkforge/internal/claim"
)

// recentHoldTTL is how long a decision is remembered: far longer than the
// cache needs to show the status write that carried it.
const recentHoldTTL = 10 * time.Second

// recentHolds remembers the codes this manager has just decided, until its
// cache shows them. Decisions are taken one at a time under its lock, so two
// workers (or one worker whose cache is a moment behind its own write) never
// give one code to two targets.
type recentHolds struct {
	mu     sync.Mutex
	byCode map[nsCode]map[string]recentHold // namespace/code -> link name -> hold
	byLink map[types.NamespacedName]nsCode
	queue  []recentRef // in decision order, for expiry
}

type nsCode struct{ namespace, code string }

type recentHold struct {
	link claim.Link
	at   time.Time
}

type recentRef struct {
	link types.NamespacedName
	at   time.Time
}

// lockedRivals adds to rivals the recent holds of codes in namespace that the
// cache may not show yet. A recent hold is added beside the cached view of
// its link, not in its place: the code the cache still shows is released
// only once the write that released it has reached the API server and come
// back through the cache. Callers hold mu.
func (h *recentHolds) lockedRivals(namespace string, codes []string, rivals []claim.Link, now time.Time) []claim.Link {
	for _, code := range codes {
		for _, hold := range h.byCode[nsCode{namespace, code}] {
			if now.Sub(hold.at) <= recentHoldTTL {
				rivals = append(rivals, hold.link)
			}
		}
	}
	return rivals
}

// lockedRecord remembers link's decision (Held empty: it holds nothing).
// Callers hold mu.
func (h *recentHolds) lockedRecord(key types.NamespacedName, link claim.Link, now time.Time) {
	if h.byCode == nil {
		h.byCode = make(map[nsCode]map[string]recentHold)
		h.byLink = make(map[types.NamespacedName]nsCode)
	}
	h.lockedForget(key)
	h.lockedExpire(now)
	if link.Held == "" {
		return
	}
	k := nsCode{key.Namespace, link.Held}
	if h.byCode[k] == nil {
		h.byCode[k] = make(map[string]recentHold)
	}
	h.byCode[k][key.Name] = recentHold{link: link, at: now}
	h.byLink[key] = k
	h.queue = append(h.queue, recentRef{link: key, at: now})
}

// forget drops what is remembered of a link (it was deleted).
func (h *recentHolds) forget(key types.NamespacedName) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.lockedForget(key)
}

func (h *recentHolds) lockedForget(key types.NamespacedName) {
	k, ok := h.byLink[key]
	if !ok {
		return
	}
	delete(h.byLink, key)
	delete(h.byCode[k], key.Name)
	if len(h.byCode[k]) == 0 {
		delete(h.byCode, k)
	}
}

func (h *recentHolds) lockedExpire(now time.Time) {
	n := 0
	for ; n < len(h.queue) && now.Sub(h.queue[n].at) > recentHoldTTL; n++ {
		ref := h.queue[n]
		if k, ok := h.byLink[ref.link]; ok {
			if hold := h.byCode[k][ref.link.Name]; !hold.at.After(ref.at) {
				h.lockedForget(ref.link)
			}
		}
	}
	h.queue = h.queue[n:]
}
