package gate

import (
	"slices"
	"strings"
)

// Identity is who a trusted auth proxy says sent a request: its user and
// groups, from the headers it sets (oauth2-proxy's X-Forwarded-User and
// X-Forwarded-Groups, an ingress's external auth, a mesh). The zero
// Identity is nobody signed in: a request that did not come through a
// trusted proxy is never anybody.
type Identity struct {
	User   string
	Groups []string
}

// SignedIn reports whether id names anybody.
func (id Identity) SignedIn() bool { return id.User != "" }

// MaxGroups and MaxNameBytes bound what a groups header is read for: a
// proxy lists a user's groups, and a header past these is not one.
const (
	MaxGroups    = 256
	MaxNameBytes = 256
)

// ParseGroups reads a groups header: names separated by commas, spaces
// around them ignored, empty ones dropped. It reads at most MaxGroups
// names, and drops any longer than MaxNameBytes.
func ParseGroups(header string) []string {
	var groups []string
	for name := range strings.SplitSeq(header, ",") {
		name = strings.TrimSpace(name)
		if name == "" || len(name) > MaxNameBytes {
			continue
		}
		groups = append(groups, name)
		if len(groups) == MaxGroups {
			break
		}
	}
	return groups
}

// Allowed are the users and groups a link opens for (spec.access).
type Allowed struct {
	Users, Groups []string
}

// Any reports whether a is a sign-in gate at all.
func (a Allowed) Any() bool { return len(a.Users) > 0 || len(a.Groups) > 0 }

// Admits reports whether id is an allowed user, or in an allowed group.
// Names compare exactly: a proxy's names are what the identity provider
// spells, and a case-folded match could admit another group.
func (a Allowed) Admits(id Identity) bool {
	if !id.SignedIn() {
		return false
	}
	if slices.Contains(a.Users, id.User) {
		return true
	}
	for _, g := range id.Groups {
		if slices.Contains(a.Groups, g) {
			return true
		}
	}
	return false
}
