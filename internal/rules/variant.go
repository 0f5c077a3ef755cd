package rules

// The variant split: a client's bucket (0-99) is a hash of the link's seed,
// the client's address and its User-Agent (AgentSum, which the redirector
// remembers with the agent's device class, so that a click need not read
// the agent again), so the same client lands in the same variant on every
// click and every replica, without shared state.
// Clients behind one address with one browser share a variant; a client
// that changes address or browser may change variant. FNV-1a spreads
// similar inputs (addresses that differ in their last byte) poorly in its
// low bits, so the sum goes through a 64-bit finalizer (SplitMix64's)
// before the modulo. The hash is part of the API's promise (a client
// keeps its variant across replicas and versions): changing it moves
// clients between variants.

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

// AgentSum is what the split reads of a User-Agent: a 32-bit hash, the
// same on every replica. Facts.AgentSum may carry it remembered.
func AgentSum(userAgent []byte) uint32 {
	return uint32(mix(hashBytes(fnvOffset, userAgent)))
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
