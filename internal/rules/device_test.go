package rules

import (
	"strings"
	"testing"
)

// classifyReference is Classify's rule read plainly: the first group with
// a token anywhere in the agent (ASCII case ignored), not counting a bot
// token that ends one of notBots.
func classifyReference(userAgent string) Device {
	for _, group := range deviceTokens {
		for _, tok := range group.tokens {
			for i := 0; i+len(tok) <= len(userAgent); i++ {
				if !strings.EqualFold(userAgent[i:i+len(tok)], tok) {
					continue
				}
				inside := false
				for _, nb := range notBots {
					end := i + len(tok)
					inside = inside || group.device == DeviceBot && end >= len(nb) && strings.EqualFold(userAgent[end-len(nb):end], nb)
				}
				if !inside {
					return group.device
				}
			}
		}
	}
	return DeviceUnknown
}

func TestClassifyMatchesReference(t *testing.T) {
	for _, ua := range []string{
		"", "b", "bot", "BOT", "cubot", "CUBOT bot", "cucubot", "xcubot", "robot", "Cubot Android", "android cubot",
		"windows nt", "WINDOWS NT", "windows  nt", "iPhone OS", "Macintosh; Linux", "crawler", "ia_archiver", "ia\x7farchiver",
		"mac os x android iphone", "x11 cros", "go-http-client/1.1", "Mozilla/5.0 (Linux; Android 9; CUBOT X19) bot",
		iphoneUA, pixelUA, winUA, botUA,
	} {
		if got, want := Classify([]byte(ua)), classifyReference(ua); got != want {
			t.Errorf("Classify(%q) = %s, the rule says %s", ua, got, want)
		}
	}
}

// FuzzClassify holds the automaton to the rule on any agent.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{iphoneUA, pixelUA, winUA, botUA, "CUBOT bot", "cucubot", "ANDROIDiphone"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, ua string) {
		if got, want := Classify([]byte(ua)), classifyReference(ua); got != want {
			t.Fatalf("Classify(%q) = %s, the rule says %s", ua, got, want)
		}
	})
}
