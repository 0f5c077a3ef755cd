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

// deviceToken is a token of deviceTokens with its group's rank (its index).
type deviceToken struct {
	text   string
	rank   int
	device Device
}

// tokensByFirstByte indexes deviceTokens by their first byte, so that
// Classify reads the agent once and tries only the tokens that can start
// at each byte.
var tokensByFirstByte = func() (t [256][]deviceToken) {
	for rank, group := range deviceTokens {
		for _, tok := range group.tokens {
			t[tok[0]] = append(t[tok[0]], deviceToken{text: tok, rank: rank, device: group.device})
		}
	}
	return t
}()

// tokenPairs has bit a<<8|b set when a token starts with the bytes a, b:
// most bytes of an agent start no token, and one load tells.
var tokenPairs = func() (t [1 << 16 / 64]uint64) {
	for _, group := range deviceTokens {
		for _, tok := range group.tokens {
			pair := uint(tok[0])<<8 | uint(tok[1])
			t[pair/64] |= 1 << (pair % 64)
		}
	}
	return t
}()

func init() {
	for _, group := range deviceTokens {
		for _, tok := range group.tokens {
			if len(tok) < 3 || tok != strings.ToLower(tok) {
				panic("rules: device token " + tok + " is not lower-case of at least three bytes")
			}
		}
	}
}

// Classify reads the device class of a User-Agent: the class of the first
// group of deviceTokens with a token in it. It reads the agent once and
// does not allocate.
func Classify(userAgent []byte) Device {
	best, bestRank := DeviceUnknown, len(deviceTokens)
	if len(userAgent) < 2 {
		return DeviceUnknown
	}
	second := lowerTable[userAgent[0]]
	for i := 0; i+1 < len(userAgent); i++ {
		first := second
		second = lowerTable[userAgent[i+1]]
		if pair := uint(first)<<8 | uint(second); tokenPairs[pair>>6]&(1<<(pair&63)) == 0 {
			continue
		}
		for _, tok := range tokensByFirstByte[first] {
			if tok.text[1] != second || tok.rank >= bestRank || !hasPrefixFold(userAgent[i:], tok.text) {
				continue
			}
			if tok.device == DeviceBot {
				if endsNotBot(userAgent, i+len(tok.text)) {
					continue
				}
				return DeviceBot // the first group: nothing can win over it
			}
			best, bestRank = tok.device, tok.rank
		}
	}
	return best
}

// endsNotBot reports whether s[:end] ends with one of notBots.
func endsNotBot(s []byte, end int) bool {
	for _, name := range notBots {
		if end >= len(name) && hasPrefixFold(s[end-len(name):], name) {
			return true
		}
	}
	return false
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

var lowerTable = func() (t [256]byte) {
	for i := range t {
		t[i] = lowerASCII(byte(i))
	}
	return t
}()

func lowerASCII(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}
