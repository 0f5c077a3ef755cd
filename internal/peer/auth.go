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

// replays remembers the MACs of the requests a holder accepted within the
// last MaxSkew*2, in two generations, so that a request captured on the
// wire is served once. It holds at most 2*maxRemembered MACs; past that,
// requests are refused until the generation turns (the forwarder then
// reserves through the API server instead: nothing is lost).
type replays struct {
	mu       sync.Mutex
	cur, old map[string]struct{}
	turned   time.Time
	every    time.Duration
}

const maxRemembered = 1 << 17

func newReplays(every time.Duration, now time.Time) *replays {
	return &replays{cur: map[string]struct{}{}, old: map[string]struct{}{}, turned: now, every: every}
}

// first reports whether mac was not seen before, and remembers it.
func (r *replays) first(mac string, now time.Time) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if now.Sub(r.turned) >= r.every {
		// A request older than a generation is refused by its time.
		r.old, r.cur, r.turned = r.cur, make(map[string]struct{}, len(r.cur)), now
	}
	if _, ok := r.cur[mac]; ok {
		return false
	}
	if _, ok := r.old[mac]; ok {
		return false
	}
	if len(r.cur) >= maxRemembered {
		return false
	}
	r.cur[mac] = struct{}{}
	return true
}
