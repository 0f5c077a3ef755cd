package peer

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"hash"
	"strconv"
	"sync"
	"time"
)

// KeySize is the size of the installation's peer key.
const KeySize = 32

// Key is the installation's peer key (see Keyring).
type Key struct {
	secret []byte
	macs   *sync.Pool // of hash.Hash (HMAC-SHA256 under secret)
}

// NewKey returns the key of secret, which must be at least KeySize bytes.
func NewKey(secret []byte) (*Key, bool) {
	if len(secret) < KeySize {
		return nil, false
	}
	s := append([]byte(nil), secret...)
	return &Key{secret: s, macs: &sync.Pool{New: func() any { return hmac.New(sha256.New, s) }}}, true
}

// RandomKey returns a new random key (tests, and a Secret's first value).
func RandomKey() []byte {
	b := make([]byte, KeySize)
	_, _ = rand.Read(b)
	return b
}

// The headers of the protocol.
const (
	headerTo    = "Linkforge-Peer-To"    // the holder a request is for
	headerNonce = "Linkforge-Peer-Nonce" // a request's nonce
	headerTime  = "Linkforge-Peer-Time"  // the sender's clock, Unix ms
	headerMAC   = "Linkforge-Peer-Mac"   // the MAC of a request or answer
	headerUse   = "Linkforge-Use"        // an answer's result
)

// The domain of each MAC: a request's MAC is never a valid answer's.
const (
	macVersion = "linkforge-peer/1"
	macRequest = "request"
	macAnswer  = "answer"
)

// mac is the base64 HMAC of the fields, each ended by a newline (no field
// holds one: names, codes and the path are checked before).
func (k *Key) mac(fields ...string) string {
	h := k.macs.Get().(hash.Hash)
	h.Reset()
	for _, f := range fields {
		_, _ = h.Write([]byte(f))
		_, _ = h.Write([]byte{'\n'})
	}
	var sum [sha256.Size]byte
	out := base64.RawURLEncoding.EncodeToString(h.Sum(sum[:0]))
	k.macs.Put(h)
	return out
}

// verify reports whether got is want, a MAC, in constant time.
func (*Key) verify(got []byte, want string) bool {
	return hmac.Equal(got, []byte(want))
}

func (k *Key) requestMAC(to, nonce, at, path string) string {
	return k.mac(macVersion, macRequest, to, nonce, at, path)
}

func (k *Key) answerMAC(holder, nonce, path, result string) string {
	return k.mac(macVersion, macAnswer, holder, nonce, path, result)
}

// newNonce is 16 random bytes, base64.
func newNonce() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

func unixMillis(t time.Time) string { return strconv.FormatInt(t.UnixMilli(), 10) }

// replays judges a request's time and remembers the MACs of the requests
// a holder accepted, so that a request captured on the wire is served
// once. Both run on the newest clock reading seen (newest): a reading
// behind it (a clock stepped back) moves neither the window nor the
// memory's expiry back, so a request forgotten because it is too old
// stays too old (before, a clock stepped back after two generations
// served a captured request again). A request is fresh within skew of
// newest; the memory keeps a MAC for more than 2*skew of newest (two
// generations of 2*skew), past which its request is stale. It holds at
// most 2*maxRemembered MACs; past that, requests are answered busy until
// the generation turns, and a request answered busy is never taken
// later either (floor): its capture cannot be served once the memory
// has room again.
type replays struct {
	mu       sync.Mutex
	cur, old map[string]struct{}
	turned   time.Time // newest when the generation last turned
	newest   time.Time
	skew     time.Duration
	// floor is the latest time of a request answered busy: a request sent
	// at or before it is answered busy too.
	floor time.Time
}

const maxRemembered = 1 << 17

func newReplays(skew time.Duration, now time.Time) *replays {
	now = now.Round(0) // the wall clock: the time requests carry
	return &replays{cur: map[string]struct{}{}, old: map[string]struct{}{}, turned: now, newest: now, skew: skew}
}

// verdict is what replays make of a request.
type verdict int

const (
	admitted verdict = iota
	stale            // its time is beyond skew of the newest reading
	replayed         // its MAC was seen before
	busy             // the memory is full (or was when a later request came)
)

// admit judges the request with MAC mac sent at sent, read at now, and
// remembers it if it is admitted. offset is how far its time is ahead of
// the newest reading (negative: behind).
func (r *replays) admit(mac string, sent, now time.Time) (v verdict, offset time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now = now.Round(0); now.After(r.newest) {
		r.newest = now
	}
	if r.newest.Sub(r.turned) > 2*r.skew {
		// What the old generation holds is stale by now: a request's time
		// is within skew of newest when it is remembered, and newest has
		// moved more than 2*skew since.
		r.old, r.cur, r.turned = r.cur, make(map[string]struct{}, len(r.cur)), r.newest
	}
	offset = sent.Sub(r.newest)
	switch {
	case offset > r.skew || offset < -r.skew:
		return stale, offset
	case !r.floor.IsZero() && !sent.After(r.floor):
		return busy, offset
	}
	if _, ok := r.cur[mac]; ok {
		return replayed, offset
	}
	if _, ok := r.old[mac]; ok {
		return replayed, offset
	}
	if len(r.cur) >= maxRemembered {
		if sent.After(r.floor) {
			r.floor = sent
		}
		return busy, offset
	}
	r.cur[mac] = struct{}{}
	return admitted, offset
}
