package events

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// The headers of a signed request, as the Standard Webhooks scheme names
// them: receivers can check them with that scheme's libraries.
const (
	HeaderWebhookID        = "Webhook-Id"
	HeaderWebhookTimestamp = "Webhook-Timestamp"
	HeaderWebhookSignature = "Webhook-Signature"
)

// signingKeyPrefix is the Standard Webhooks prefix of a secret's text.
const signingKeyPrefix = "whsec_"

// MinSigningKeyLen is the fewest bytes a signing key may have (decoded).
const MinSigningKeyLen = 16

// ParseSigningKey reads a signing key as a Secret holds it, the way the
// Standard Webhooks libraries read a secret (the Go library's NewWebhook,
// the TypeScript one's Webhook): base64 (standard, padded), with or without
// "whsec_" before it, decoded. A key that is not base64 is refused, never
// taken as its bytes: a receiver's library would decode it and check
// every signature with another key. The error does not quote the key.
func ParseSigningKey(s string) ([]byte, error) {
	k, err := base64.StdEncoding.DecodeString(strings.TrimPrefix(s, signingKeyPrefix))
	if err != nil {
		return nil, fmt.Errorf("the signing key is not base64 (%v): the Standard Webhooks libraries base64-decode every secret, with or without %q before it, so give the key as they read it, such as %q$(head -c 32 /dev/urandom | base64)", err, signingKeyPrefix, signingKeyPrefix)
	}
	if len(k) < MinSigningKeyLen {
		return nil, fmt.Errorf("the signing key has %d bytes once base64-decoded: give %d at least (32 random bytes are best)", len(k), MinSigningKeyLen)
	}
	return k, nil
}

// Sign returns the webhook-signature header value of a request: "v1,"
// and the base64 HMAC-SHA256, keyed with key, of id "." unix seconds "."
// body. The id is the first event's id (the idempotency key: the same on
// every attempt), the timestamp that of the attempt (so a receiver can
// refuse replays).
func Sign(key []byte, id string, unix int64, body []byte) string {
	mac := hmac.New(sha256.New, key)
	mac.Write([]byte(id))
	mac.Write([]byte{'.'})
	mac.Write(strconv.AppendInt(nil, unix, 10))
	mac.Write([]byte{'.'})
	mac.Write(body)
	return "v1," + base64.StdEncoding.EncodeToString(mac.Sum(nil))
}

// signRequest sets the signature headers of a request.
func signRequest(h http.Header, key []byte, id string, now time.Time, body []byte) {
	unix := now.Unix()
	h.Set(HeaderWebhookID, id)
	h.Set(HeaderWebhookTimestamp, strconv.FormatInt(unix, 10))
	h.Set(HeaderWebhookSignature, Sign(key, id, unix, body))
}

// Verify checks a signed request's headers and body, as a receiver does:
// one of the signatures (space-separated) matches, and the timestamp is
// within tolerance of now.
func Verify(key []byte, h http.Header, body []byte, now time.Time, tolerance time.Duration) error {
	id, ts := h.Get(HeaderWebhookID), h.Get(HeaderWebhookTimestamp)
	if id == "" || ts == "" {
		return errors.New("unsigned: no webhook-id or webhook-timestamp header")
	}
	unix, err := strconv.ParseInt(ts, 10, 64)
	if err != nil {
		return fmt.Errorf("webhook-timestamp %q is not Unix seconds", ts)
	}
	if d := now.Sub(time.Unix(unix, 0)); d > tolerance || d < -tolerance {
		return fmt.Errorf("webhook-timestamp is %s from now: more than %s", d.Round(time.Second), tolerance)
	}
	want := Sign(key, id, unix, body)
	for _, sig := range strings.Fields(h.Get(HeaderWebhookSignature)) {
		if hmac.Equal([]byte(sig), []byte(want)) {
			return nil
		}
	}
	return errors.New("no webhook-signature matches the body")
}
