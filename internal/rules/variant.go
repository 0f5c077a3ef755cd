package rules

// The variant split: a client's bucket (0-99) is a hash of the link's seed,
// the client's address and its agent's family (AgentSum: the User-Agent
// without its versions, which the redirector remembers with the agent's
// device class, so that a click need not read the agent again), so the
// same client lands in the same bucket on every click, every replica and
// every update of its browser, without shared state; which destination
// holds each bucket is the link's assignment (split.go).
// Clients behind one address with one browser share a variant; a client
// that changes address or browser may change variant. FNV-1a spreads
// similar inputs (addresses that differ in their last byte) poorly in its
// low bits, so the sum goes through a 64-bit finalizer (SplitMix64's)
// before the modulo. The hash is part of the API's promise (a client
// keeps its variant across replicas and versions): changing it moves
// clients between variants (it changed once, in issue 53: the agent's
// versions were in it, so a browser update moved half the clients of a
// 50/50 split).

import (
	"encoding/binary"
	"math/bits"
	"net/netip"
)

const (
	fnvOffset = 14695981039346656037
	fnvPrime  = 1099511628211
)

func hashString(h uint64, s string) uint64 {
	for i := 0; i < len(s); i++ {
		h = (h ^ uint64(s[i])) * fnvPrime
	}
	return h
}

// hashBytes folds b into h eight bytes at a time (a User-Agent is long,
// and this runs on every split click), the tail byte by byte. The loop
// takes two words a turn: the same fold, half the loop's own work.
func hashBytes(h uint64, b []byte) uint64 {
	for len(b) >= 16 {
		h = bits.RotateLeft64((h^binary.LittleEndian.Uint64(b[:8]))*fnvPrime, 29)
		h = bits.RotateLeft64((h^binary.LittleEndian.Uint64(b[8:16]))*fnvPrime, 29)
		b = b[16:]
	}
	if len(b) >= 8 {
		h = bits.RotateLeft64((h^binary.LittleEndian.Uint64(b[:8]))*fnvPrime, 29)
		b = b[8:]
	}
	for _, c := range b {
		h = (h ^ uint64(c)) * fnvPrime
	}
	return h
}

func mix(h uint64) uint64 {
	h ^= h >> 30
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 27
	h *= 0x94d049bb133111eb
	h ^= h >> 31
	return h
}

// AgentSum is what the split reads of a User-Agent: a 32-bit hash of its
// family, the agent without its versions, the same on every replica. Every
// digit is left out, and so is what follows a '/' up to the next space,
// ';', ',', '(' or ')': "Chrome/121.0.6167.85" is "Chrome/", "Mobile/15E148"
// "Mobile/", "Windows NT 10.0" "Windows NT .". So an update of the browser
// or its system (Chrome ships every four weeks) keeps a client's variant,
// while two browsers at one address (Chrome and Firefox, or Chrome on a
// phone and on a laptop) are two clients. Facts.AgentSum may carry it
// remembered.
func AgentSum(userAgent []byte) uint32 {
	h := uint64(fnvOffset)
	version := false
	for _, c := range userAgent {
		switch {
		case version:
			if c != ' ' && c != ';' && c != ',' && c != '(' && c != ')' {
				continue
			}
			version = false
		case c == '/':
			version = true
		case '0' <= c && c <= '9':
			continue
		}
		h = (h ^ uint64(c)) * fnvPrime
	}
	return uint32(mix(h))
}

// bucket is the client's bucket, 0-99, of its address (its 16 bytes,
// IPv4 as IPv4-mapped) and AgentSum.
func bucket(seed uint64, addr netip.Addr, agentSum uint32) uint64 {
	a := addr.As16()
	h := hashBytes(seed, a[:])
	h = (h ^ 0xff) * fnvPrime // separates addr from the User-Agent's sum
	h = (h ^ uint64(agentSum)) * fnvPrime
	return mix(h) % 100
}
