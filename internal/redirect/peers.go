package redirect

import (
	"sync"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

// forwardPeer is the peer address a replica without quota asks for a use
// of a link with these reservations: the peer of the one with the most
// quota, the first of them on a tie ("": none has a peer).
func forwardPeer(rs []linkv1.UseReservation) string {
	var best linkv1.UseReservation
	for _, r := range rs {
		if forwardsBefore(r, best) {
			best = r
		}
	}
	return best.Peer
}

// forwardsBefore reports whether r is a better peer to forward to than
// best: it has a peer, and best has none or less quota.
func forwardsBefore(r, best linkv1.UseReservation) bool {
	return r.Peer != "" && (best.Peer == "" || r.Quota > best.Quota)
}

// peerID is a peer address in the process' peer table (0: none). A Link
// keeps the 4-byte id, not the 16-byte string header: few links hold a
// reservation, and every Link pays for the field.
type peerID uint32

// maxPeers bounds the peer table: a replica's peer address changes only
// when its pod does. Past it, new addresses are not forwarded to.
const maxPeers = 1 << 16

// peerTable interns peer addresses. It only grows, by an address per
// redirector pod ever seen, each a few dozen bytes.
type peerTable struct {
	mu    sync.RWMutex
	ids   map[string]peerID
	addrs []string // addrs[id-1]
}

var peers = &peerTable{ids: map[string]peerID{}}

// id interns addr.
func (t *peerTable) id(addr string) peerID {
	if addr == "" {
		return 0
	}
	t.mu.RLock()
	id, ok := t.ids[addr]
	t.mu.RUnlock()
	if ok {
		return id
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if id, ok := t.ids[addr]; ok {
		return id
	}
	if len(t.addrs) >= maxPeers {
		return 0
	}
	t.addrs = append(t.addrs, addr)
	id = peerID(len(t.addrs))
	t.ids[addr] = id
	return id
}

// addr is the address of id ("" for 0).
func (id peerID) addr() string {
	if id == 0 {
		return ""
	}
	peers.mu.RLock()
	defer peers.mu.RUnlock()
	return peers.addrs[id-1]
}
