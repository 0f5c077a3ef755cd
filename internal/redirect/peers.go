package redirect

import (
	"sync"

	"k8s.io/apimachinery/pkg/types"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/peer"
	"github.com/linkforge/linkforge/internal/uses"
)

// TakeForPeer serves one use of the link ns/code for another replica that
// forwarded a click (peer.Taker): from this replica's quota only, and only
// of the same object, which must answer now.
func (r *Redirector) TakeForPeer(ns, code string, uid uint64) peer.Result {
	e := r.index.Lookup(ns, code)
	if e == nil || e.counter == nil || !e.is(flagMaxUses) || r.opts.Uses == nil || uses.UIDKey(types.UID(e.UID)) != uid {
		return peer.Unknown
	}
	at := r.now()
	if !e.answersNow(at.UnixNano()) {
		return peer.Gone
	}
	switch r.opts.Uses.TakeHeld(e.counter, at) {
	case uses.Served:
		return peer.Served
	case uses.Exhausted:
		return peer.Gone
	}
	return peer.Refused
}

// forwardTo is the reservation a replica without quota asks for a use of
// a link with these reservations: the one with a peer address and the
// most quota, the first of them on a tie, but none asked to return its
// quota (another replica could not reach it; zero: none is left).
func forwardTo(rs []linkv1.UseReservation) linkv1.UseReservation {
	var best linkv1.UseReservation
	for _, r := range rs {
		if forwardsBefore(r, best) {
			best = r
		}
	}
	return best
}

// forwardsBefore reports whether r is a better peer to forward to than
// best: it has a peer that speaks this release's peer protocol (an earlier
// release's holder would serve a use it cannot prove, and the use would
// be lost) and is not asked to return, and best has none or less quota.
func forwardsBefore(r, best linkv1.UseReservation) bool {
	return r.PeerAddress != "" && r.PeerProtocol == linkv1.PeerProtocolHMACv1 && !r.ReturnRequested &&
		(best.PeerAddress == "" || r.Quota > best.Quota)
}

// peerID is a holder in the process' peer table (0: none). A Link keeps
// the 4-byte id, not the strings: few links hold a reservation, and every
// Link pays for the field.
type peerID uint32

// maxPeers bounds the peer table: a replica's name and address change
// only when its process does. Past it, new holders are not forwarded to.
const maxPeers = 1 << 16

// peerTable interns holders. It only grows, by an entry per redirector
// process ever seen (a name has a per-process suffix), a few dozen bytes
// each.
type peerTable struct {
	mu      sync.RWMutex
	ids     map[uses.Holder]peerID
	holders []uses.Holder // holders[id-1]
}

var peers = &peerTable{ids: map[uses.Holder]peerID{}}

// id interns the holder of reservation r (0 if it has no peer).
func (t *peerTable) id(r linkv1.UseReservation) peerID {
	if r.PeerAddress == "" {
		return 0
	}
	h := uses.Holder{Name: r.Holder, Peer: r.PeerAddress}
	t.mu.RLock()
	id, ok := t.ids[h]
	t.mu.RUnlock()
	if ok {
		return id
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if id, ok := t.ids[h]; ok {
		return id
	}
	if len(t.holders) >= maxPeers {
		return 0
	}
	t.holders = append(t.holders, h)
	id = peerID(len(t.holders))
	t.ids[h] = id
	return id
}

// holder is the holder of id (zero for 0).
func (id peerID) holder() uses.Holder {
	if id == 0 {
		return uses.Holder{}
	}
	peers.mu.RLock()
	defer peers.mu.RUnlock()
	return peers.holders[id-1]
}
