package rules

import (
	"strings"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

// Device is a client's device class as read from its User-Agent.
type Device uint8

const (
	// DeviceUnknown: no User-Agent, or one of no known kind. It matches no
	// devices condition.
	DeviceUnknown Device = iota
	DeviceIOS
	DeviceAndroid
	DeviceDesktop
	DeviceBot
	numDevices
)

// String is the name spec.rules[].devices uses (unknown for DeviceUnknown).
func (d Device) String() string {
	switch d {
	case DeviceIOS:
		return string(linkv1.DeviceIOS)
	case DeviceAndroid:
		return string(linkv1.DeviceAndroid)
	case DeviceDesktop:
		return string(linkv1.DeviceDesktop)
	case DeviceBot:
		return string(linkv1.DeviceBot)
	}
	return "unknown"
}

func parseDevice(c linkv1.DeviceClass) (Device, bool) {
	switch c {
	case linkv1.DeviceIOS:
		return DeviceIOS, true
	case linkv1.DeviceAndroid:
		return DeviceAndroid, true
	case linkv1.DeviceDesktop:
		return DeviceDesktop, true
	case linkv1.DeviceBot:
		return DeviceBot, true
	}
	return DeviceUnknown, false
}

// deviceTokens is the classification table: a User-Agent belongs to the
// class of the first group with a token it contains (ASCII case ignored).
// Bots come first because crawlers that render as phones say so
// (Googlebot's smartphone agent names Android and iPhone too); phones
// before desktops because Android agents name Linux. iPadOS 13 and later
// send a macOS agent by default and read as desktop: nothing in the agent
// tells them apart. testdata/user-agents.txt holds the corpus it is
// tested against.
var deviceTokens = []struct {
	device Device
	tokens []string
}{
	{DeviceBot, []string{
		"bot", "crawl", "spider", "slurp", "facebookexternalhit", "facebookcatalog",
		"whatsapp", "embedly", "skypeuripreview", "bingpreview", "google-inspectiontool",
		"googleother", "feedfetcher", "mediapartners-google", "lighthouse", "headlesschrome",
		"curl/", "wget/", "httpie/", "python-requests", "python-urllib", "aiohttp",
		"go-http-client", "java/", "okhttp", "apache-httpclient", "libwww-perl", "axios/",
		"node-fetch", "undici", "postmanruntime", "insomnia/", "mastodon/", "pleroma",
		"snapchat/", "vkshare", "pinterest/", "qwantify", "ia_archiver", "scrapy",
	}},
	{DeviceIOS, []string{"iphone", "ipad", "ipod"}},
	{DeviceAndroid, []string{"android"}},
	{DeviceDesktop, []string{"windows nt", "macintosh", "mac os x", "x11", "cros", "linux"}},
}

// notBots are names that end in a bot token without being bots: phone
// brands whose model names appear in Android agents ("CUBOT X19").
var notBots = []string{"cubot"}

// Classify reads the device class of a User-Agent: the class of the first
// group of deviceTokens with a token in it (ASCII case ignored), an
// occurrence of a bot token that ends one of notBots aside. It reads the
// agent once, a table lookup per byte (tokenMatcher), and does not
// allocate.
func Classify(userAgent []byte) Device {
	return matcher.classify(userAgent)
}

func (m *tokenMatcher) classify(userAgent []byte) Device {
	next := m.next
	best, row, i := m.none, 0, 0
	for {
		// The hot loop: a step per byte until a token may end.
		for ; i < len(userAgent); i++ {
			step := next[row+int(m.class[userAgent[i]])]
			row = int(step &^ tokenEnds)
			if step&tokenEnds != 0 {
				break
			}
		}
		if i >= len(userAgent) {
			break
		}
		i++
		if r := m.rankAt[row]; r < best {
			if r == 0 {
				return deviceTokens[0].device // the first group: nothing wins over it
			}
			best = r
		}
	}
	if best == m.none {
		return DeviceUnknown
	}
	return deviceTokens[best].device
}

// tokenEnds marks a step of tokenMatcher.next into a state where a token ends.
const tokenEnds = 1 << 15

// tokenMatcher is an Aho-Corasick automaton of deviceTokens and notBots,
// made a DFA over byte classes: one step per byte of the agent, whatever
// the number of tokens.
type tokenMatcher struct {
	// class maps a byte to its class: 0 for bytes no token holds, the
	// same class for an ASCII letter in either case.
	class   [256]uint8
	classes int
	// next[state*classes+class] is the state after reading a byte, as the
	// offset of its row (state*classes), with tokenEnds set when a token
	// may end there (rank is not none): a step is one load and no multiply.
	next []uint16
	// rankAt[row] is the lowest group rank of the tokens that end at the
	// state of that row (tokenRank), by row offset, as next gives it.
	rankAt []uint8
	none   uint8
}

var matcher = buildMatcher()

func buildMatcher() tokenMatcher {
	m := tokenMatcher{none: uint8(len(deviceTokens))}
	patterns := append(deviceTokenList(), notBots...)
	m.setClasses(patterns)
	prefixes, goTo := m.trie(patterns)
	steps := m.steps(goTo)
	n := len(prefixes)
	if n*m.classes >= tokenEnds {
		panic("rules: too many device token states")
	}
	rank := make([]uint8, n)
	m.rankAt = make([]uint8, n*m.classes)
	for s, prefix := range prefixes {
		rank[s] = m.tokenRank(prefix)
		m.rankAt[s*m.classes] = rank[s]
	}
	m.next = make([]uint16, len(steps))
	for i, t := range steps {
		m.next[i] = t * uint16(m.classes)
		if rank[t] != m.none {
			m.next[i] |= tokenEnds
		}
	}
	return m
}

// deviceTokenList is every token of deviceTokens, checked lower-case.
func deviceTokenList() []string {
	var out []string
	for _, group := range deviceTokens {
		for _, tok := range group.tokens {
			if tok == "" || tok != strings.ToLower(tok) {
				panic("rules: device token " + tok + " is not lower-case")
			}
			out = append(out, tok)
		}
	}
	return out
}

// setClasses gives each byte the patterns hold a class, a letter's two
// cases the same one.
func (m *tokenMatcher) setClasses(patterns []string) {
	m.classes = 1
	for _, p := range patterns {
		for i := 0; i < len(p); i++ {
			if c := p[i]; m.class[c] == 0 {
				m.class[c] = uint8(m.classes)
				if 'a' <= c && c <= 'z' {
					m.class[c-'a'+'A'] = uint8(m.classes)
				}
				m.classes++
			}
		}
	}
}

// trie returns the prefixes of the patterns, state 0 the empty one, and
// the trie's edges by class.
func (m *tokenMatcher) trie(patterns []string) (prefixes []string, goTo []map[uint8]uint16) {
	prefixes, goTo = []string{""}, []map[uint8]uint16{{}}
	for _, p := range patterns {
		s := 0
		for i := 0; i < len(p); i++ {
			cl := m.class[p[i]]
			if t, ok := goTo[s][cl]; ok {
				s = int(t)
				continue
			}
			prefixes = append(prefixes, p[:i+1])
			goTo = append(goTo, map[uint8]uint16{})
			goTo[s][cl] = uint16(len(prefixes) - 1)
			s = len(prefixes) - 1
		}
	}
	return prefixes, goTo
}

// steps is the DFA: steps[state*classes+class] is the state of the
// longest suffix of (prefix + byte) that is a prefix of a pattern. Built
// breadth first, so that each state's fallback is complete before it.
func (m *tokenMatcher) steps(goTo []map[uint8]uint16) []uint16 {
	steps := make([]uint16, len(goTo)*m.classes)
	fallback := make([]uint16, len(goTo))
	queue := []int{0}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for cl := 0; cl < m.classes; cl++ {
			t, ok := goTo[s][uint8(cl)]
			switch {
			case ok:
				steps[s*m.classes+cl] = t
				if s != 0 {
					fallback[t] = steps[int(fallback[s])*m.classes+cl]
				}
				queue = append(queue, int(t))
			case s != 0:
				steps[s*m.classes+cl] = steps[int(fallback[s])*m.classes+cl]
			}
		}
	}
	return steps
}

// tokenRank is the lowest group rank of the tokens prefix ends with, a bot
// token that ends one of notBots there aside; none if there is none.
func (m *tokenMatcher) tokenRank(prefix string) uint8 {
	best := m.none
	for rank, group := range deviceTokens {
		for _, tok := range group.tokens {
			if !strings.HasSuffix(prefix, tok) || uint8(rank) >= best {
				continue
			}
			inside := false
			for _, nb := range notBots {
				inside = inside || group.device == DeviceBot && strings.HasSuffix(prefix, nb) && strings.HasSuffix(nb, tok)
			}
			if !inside {
				best = uint8(rank)
			}
		}
	}
	return best
}

// hasPrefixFold reports whether s starts with the lower-case ASCII prefix.
func hasPrefixFold(s []byte, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for i := 0; i < len(prefix); i++ {
		if lowerASCII(s[i]) != prefix[i] {
			return false
		}
	}
	return true
}

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
