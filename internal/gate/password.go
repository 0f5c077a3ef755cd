// Package gate decides who may follow a gated link (spec.access): whoever
// knows its password, checked against a bcrypt hash the spec holds, or
// whoever a trusted auth proxy says is an allowed user or in an allowed
// group; and it bounds what guessing costs (Limiter). It holds no HTTP:
// the redirector answers with its decisions.
package gate

import (
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"golang.org/x/crypto/bcrypt"
)

// Why bcrypt and not argon2id: a verification must fit the redirector's
// render budget, at most a few at once, without a memory spike. bcrypt at
// cost 10 is about 50-100 ms of one core and 4 KiB; argon2id at the
// parameters that make it worth choosing (19 MiB and more) would cost each
// verification that much memory, on a process that holds 100,000 links in
// under 100 MiB.

// The costs a hash may have. Below MinCost, an attacker who can read
// ShortLinks (the hash is in the spec) guesses too fast; above MaxCost, one
// verification holds a core for too long (each +1 doubles it).
const (
	MinCost     = 10
	MaxCost     = 12
	DefaultCost = 10
)

// MaxPasswordBytes is the longest password bcrypt reads: a longer one is
// refused when hashed, and never matches when checked.
const MaxPasswordBytes = 72

// HashPattern is the form of spec.access.passwordHash, for the CRD: a
// bcrypt hash in the modular crypt format ($2a$, $2b$ or $2y$), of a cost
// from MinCost to MaxCost.
const HashPattern = `^\$2[aby]\$1[0-2]\$[./A-Za-z0-9]{53}$`

var hashForm = regexp.MustCompile(HashPattern)

// CheckHash says what is wrong with a password hash, in words a user can
// act on, or nil.
func CheckHash(hash string) error {
	if hashForm.MatchString(hash) {
		return nil
	}
	if len(hash) < 7 || hash[0] != '$' || hash[1] != '2' {
		return errors.New("not a bcrypt hash ($2b$10$ and 53 characters): write the hash, never the password; `kubectl linkforge create --password-prompt` or `htpasswd -nbBC 10 '' PASSWORD | cut -d: -f2` makes one")
	}
	if cost, err := strconv.Atoi(hash[4:6]); err == nil && hash[3] == '$' && hash[6] == '$' && (cost < MinCost || cost > MaxCost) {
		return fmt.Errorf("bcrypt cost %d: use %d to %d (below, a guess costs an attacker with the hash too little; above, a check holds a redirector core too long)", cost, MinCost, MaxCost)
	}
	return errors.New("not a bcrypt hash of the form $2b$10$ followed by 53 characters of [./A-Za-z0-9]")
}

// Cost is the cost of a valid hash (CheckHash), else DefaultCost.
func Cost(hash string) int {
	if !hashForm.MatchString(hash) {
		return DefaultCost
	}
	return int(hash[4]-'0')*10 + int(hash[5]-'0')
}

// Hash is the bcrypt hash of password at cost (0: DefaultCost).
func Hash(password []byte, cost int) (string, error) {
	if cost == 0 {
		cost = DefaultCost
	}
	if cost < MinCost || cost > MaxCost {
		return "", fmt.Errorf("bcrypt cost %d: use %d to %d", cost, MinCost, MaxCost)
	}
	if len(password) == 0 {
		return "", errors.New("an empty password")
	}
	if len(password) > MaxPasswordBytes {
		return "", fmt.Errorf("a password of %d bytes: bcrypt reads at most %d", len(password), MaxPasswordBytes)
	}
	h, err := bcrypt.GenerateFromPassword(password, cost)
	return string(h), err
}

// Verify reports whether password is the one hash was made from. It takes
// the hash's time whatever the password (bcrypt compares in constant
// time); an invalid hash or a password bcrypt cannot read never matches,
// and costs a dummy verification all the same, so that the time of the
// answer tells nothing.
func Verify(hash string, password []byte) bool {
	if !hashForm.MatchString(hash) || len(password) > MaxPasswordBytes || len(password) == 0 {
		_ = bcrypt.CompareHashAndPassword(dummyHash, password[:min(len(password), MaxPasswordBytes)])
		return false
	}
	return bcrypt.CompareHashAndPassword([]byte(hash), password) == nil
}

// dummyHash is a valid hash at DefaultCost that nothing matches: what a
// verification that cannot succeed spends.
var dummyHash = []byte("$2a$10$ORHuYSbP4fwRYPUrXL/K6urGENduFb2UYUWBxuiwNRzji0HU5cMVO")
