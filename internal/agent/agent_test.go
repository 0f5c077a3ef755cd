package agent

import (
	"bufio"
	"os"
	"strings"
	"testing"
)

// corpusLine is a line of testdata/user-agents.tsv.
type corpusLine struct {
	line                          int
	ua                            string
	class, platform, form, source string
}

func readCorpus(t testing.TB) []corpusLine {
	t.Helper()
	f, err := os.Open("testdata/user-agents.tsv")
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = f.Close() }()
	var out []corpusLine
	sc := bufio.NewScanner(f)
	for n := 1; sc.Scan(); n++ {
		text := sc.Text()
		if strings.HasPrefix(text, "#") {
			continue
		}
		cols := strings.Split(text, "\t")
		if len(cols) != 5 {
			t.Fatalf("line %d: %d tab-separated columns, want 5 (user-agent, class, platform, form, source)", n, len(cols))
		}
		out = append(out, corpusLine{n, cols[0], cols[1], cols[2], cols[3], cols[4]})
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestCorpus: every agent of the corpus reads as the corpus says, and
// says where it comes from.
func TestCorpus(t *testing.T) {
	lines := readCorpus(t)
	seen := map[string]int{}
	for _, l := range lines {
		if !strings.HasPrefix(l.source, "https://") && !strings.HasPrefix(l.source, "http://") {
			t.Errorf("line %d: source %q is not a URL", l.line, l.source)
		}
		if first, ok := seen[l.ua]; ok {
			t.Errorf("line %d: %q is line %d's agent too", l.line, l.ua, first)
		}
		seen[l.ua] = l.line
		a := Classify([]byte(l.ua))
		if got, want := [3]string{a.Class().String(), a.Platform().String(), a.Form().String()}, [3]string{l.class, l.platform, l.form}; got != want {
			t.Errorf("line %d: %q is %v, want %v", l.line, l.ua, got, want)
		}
	}
	if len(lines) < 100 {
		t.Errorf("the corpus has %d agents, want at least 100", len(lines))
	}
}

// TestCorpusCoversEveryClass: the corpus holds agents of every Class.
func TestCorpusCoversEveryClass(t *testing.T) {
	count := map[string]int{}
	for _, l := range readCorpus(t) {
		count[l.class]++
	}
	for c := range numClasses {
		if count[c.String()] < 3 {
			t.Errorf("the corpus has %d %s agents, want at least 3", count[c.String()], c)
		}
		t.Logf("%-10s %d", c, count[c.String()])
	}
}

// TestTableRules holds the table to the rules of the package
// documentation, each by an agent of the corpus that once read otherwise.
func TestTableRules(t *testing.T) {
	for _, tc := range []struct {
		rule, ua string
		want     Agent
	}{
		{"an empty agent is a library", "", pack(Library, PlatformUnknown, FormUnknown)},
		{"a bot's kind before its device", "Mozilla/5.0 (Linux; Android 6.0.1; Nexus 5X Build/MMB29P) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/121.0.6167.160 Mobile Safari/537.36 (compatible; Googlebot/2.1; +http://www.google.com/bot.html)", pack(Crawler, PlatformAndroid, FormMobile)},
		{"Pinterest's in-app browser is a person", "Mozilla/5.0 (iPhone; CPU iPhone OS 12_1 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Mobile/16B92 [Pinterest/iOS]", pack(Person, PlatformIOS, FormMobile)},
		{"Pinterest's previewer is not", "Pinterest/0.2 (+https://www.pinterest.com/bot.html)", pack(Previewer, PlatformUnknown, FormUnknown)},
		{"Snapchat's in-app browser is a person", "Mozilla/5.0 (iPhone; CPU iPhone OS 15_2 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/15.2 Mobile/15E148 Snapchat/11.68.0.37 (like Safari/8612.3.6.0.4, panda)", pack(Person, PlatformIOS, FormMobile)},
		{"Snapchat's previewer is not", "Snap URL Preview Service; bot; snapchat; https://developers.snap.com/robots", pack(Previewer, PlatformUnknown, FormUnknown)},
		{"a CUBOT is a phone", "Mozilla/5.0 (Linux; Android 9; CUBOT X19) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/110.0.5481.65 Mobile Safari/537.36", pack(Person, PlatformAndroid, FormMobile)},
		{"cros inside Microsoft is no ChromeOS", "Microsoft Office Existence Discovery", pack(Prefetcher, PlatformUnknown, FormUnknown)},
		{"CrOS as a word is", "Mozilla/5.0 (X11; CrOS x86_64 15633.69.0) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/119.0.6045.212 Safari/537.36", pack(Person, PlatformDesktop, FormDesktop)},
		{"a previewer before the library it uses", "LinkedInBot/1.0 (compatible; Mozilla/5.0; Apache-HttpClient +http://www.linkedin.com)", pack(Previewer, PlatformUnknown, FormUnknown)},
		{"a monitor before the bot it says it is", "Pingdom.com_bot_version_1.4_(http://www.pingdom.com/)", pack(Monitor, PlatformUnknown, FormUnknown)},
		{"iPadOS's desktop mode reads as desktop", "Mozilla/5.0 (Macintosh; Intel Mac OS X 10_7_3) AppleWebKit/534.53.11 (KHTML, like Gecko) Version/5.1.3 Safari/534.53.10 (9E5413BC-7DB8-4B71-B876-69EDA4BAC03D)", pack(Person, PlatformDesktop, FormDesktop)},
		{"Android without Mobile is a tablet", "Mozilla/5.0 (Linux; Android 13; SM-X710) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/120.0.0.0 Safari/537.36", pack(Person, PlatformAndroid, FormTablet)},
		{"nothing known is unknown", "Mozilla/5.0", pack(Unknown, PlatformUnknown, FormUnknown)},
	} {
		if got := Classify([]byte(tc.ua)); got != tc.want {
			t.Errorf("%s: %q is %s, want %s", tc.rule, tc.ua, describe(got), describe(tc.want))
		}
	}
}

func describe(a Agent) string {
	return a.Class().String() + "/" + a.Platform().String() + "/" + a.Form().String()
}

func TestClassifyDoesNotAllocate(t *testing.T) {
	lines := readCorpus(t)
	agents := make([][]byte, 0, len(lines))
	for _, l := range lines {
		agents = append(agents, []byte(l.ua))
	}
	if n := testing.AllocsPerRun(20, func() {
		for _, ua := range agents {
			Classify(ua)
		}
	}); n != 0 {
		t.Errorf("Classify allocates %v times over the corpus", n)
	}
}

// TestClassifyIgnoresASCIICase over the corpus; FuzzClassify over any agent.
func TestClassifyIgnoresASCIICase(t *testing.T) {
	for _, l := range readCorpus(t) {
		ua := []byte(l.ua)
		if a, up, low := Classify(ua), Classify(asciiUpper(ua)), Classify(asciiLower(ua)); up != a || low != a {
			t.Errorf("line %d: %s, upper-cased %s, lower-cased %s", l.line, describe(a), describe(up), describe(low))
		}
	}
}

func TestAgentPacking(t *testing.T) {
	for c := range numClasses {
		for p := range Platform(4) {
			for f := range Form(4) {
				a := pack(c, p, f)
				if a >= 1<<Bits || a.Class() != c || a.Platform() != p || a.Form() != f {
					t.Errorf("pack(%s, %s, %s) = %#x reads %s", c, p, f, uint8(a), describe(a))
				}
				if bot := c != Person && c != Unknown; a.Bot() != bot {
					t.Errorf("%s: Bot() = %v", c, a.Bot())
				}
				if reads := c == Previewer || c == Crawler || c == Prefetcher || c == Monitor; a.Reads() != reads {
					t.Errorf("%s: Reads() = %v", c, a.Reads())
				}
			}
		}
	}
	for _, tc := range []struct{ got, want string }{
		{Unknown.String() + "," + Person.String() + "," + Previewer.String() + "," + Crawler.String() + "," + Prefetcher.String() + "," + Monitor.String() + "," + Library.String(),
			"unknown,person,previewer,crawler,prefetcher,monitor,library"},
		{PlatformUnknown.String() + "," + PlatformIOS.String() + "," + PlatformAndroid.String() + "," + PlatformDesktop.String(), "unknown,ios,android,desktop"},
		{FormUnknown.String() + "," + FormDesktop.String() + "," + FormMobile.String() + "," + FormTablet.String(), "unknown,desktop,mobile,tablet"},
		{Class(200).String(), "unknown"},
	} {
		if tc.got != tc.want {
			t.Errorf("names %q, want %q", tc.got, tc.want)
		}
	}
}

// referenceSignals is the table read plainly: the signals of every token
// found anywhere in the agent (ASCII case ignored; a '^' token only at a
// word's start), but for a token that ends where a notToken ending in it
// ends.
func referenceSignals(ua string) signal {
	lower := string(asciiLower([]byte(ua)))
	var s signal
	for _, t := range tokens {
		text, word := strings.CutPrefix(t.text, "^")
		for i := 0; ; i++ {
			j := strings.Index(lower[i:], text)
			if j < 0 {
				break
			}
			i += j
			if (!word || i == 0 || !isWordByte(lower[i-1])) && !endsNotToken(lower, text, i+len(text)) {
				s |= t.says
			}
		}
	}
	return s
}

func endsNotToken(lower, text string, end int) bool {
	for _, w := range notTokens {
		if strings.HasSuffix(w, text) && end >= len(w) && lower[end-len(w):end] == w {
			return true
		}
	}
	return false
}

func TestAutomatonMatchesReference(t *testing.T) {
	check := func(ua string) {
		t.Helper()
		if got, want := table.scan([]byte(ua)), referenceSignals(ua); got != want {
			t.Errorf("%q: the automaton finds %#x, the table says %#x", ua, got, want)
		}
	}
	for _, ua := range []string{
		"", "b", "bot", "BOT", "cubot", "CUBOT bot", "cucubot", "xcubot", "robot", "Cubot Android", "android cubot",
		"; m bot", "; M BOT TAB", "custom bot", "m bot", ";m bot",
		"cros", "CrOS", "(cros", " cros", "microsoft", "Microsoft Office", "xcros", "9cros", "\xffcros", "_cros",
		"java/1", "xjava/1", "(java/1", "Java/17",
		"windows  nt", "iPhone OS", "Macintosh; Linux", "ia\x7farchiver", "[pinterest/ios]", "pinterest/0.2", "snapchat/1 snap url preview",
	} {
		check(ua)
	}
	for _, l := range readCorpus(t) {
		check(l.ua)
	}
}

// FuzzClassify: any agent is read without a panic, as the table says,
// and the same in either ASCII case.
func FuzzClassify(f *testing.F) {
	for _, s := range []string{chromeDesktop, iphoneSafari, slackbot, "CUBOT bot", "cucubot", "Microsoft cros", "ANDROIDiphone", "; M bot"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, ua []byte) {
		a := Classify(ua)
		if a >= 1<<Bits {
			t.Fatalf("%q: %#x uses more than %d bits", ua, uint8(a), Bits)
		}
		if up := Classify(asciiUpper(ua)); up != a {
			t.Fatalf("%q is %s, upper-cased %s", ua, describe(a), describe(up))
		}
		if len(ua) > 0 {
			if got, want := table.scan(ua), referenceSignals(string(ua)); got != want {
				t.Fatalf("%q: the automaton finds %#x, the table says %#x", ua, got, want)
			}
		}
	})
}

func asciiUpper(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		if 'a' <= c && c <= 'z' {
			c -= 'a' - 'A'
		}
		out[i] = c
	}
	return out
}

func asciiLower(b []byte) []byte {
	out := make([]byte, len(b))
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		out[i] = c
	}
	return out
}

const (
	chromeDesktop = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/121.0.0.0 Safari/537.36"
	iphoneSafari  = "Mozilla/5.0 (iPhone; CPU iPhone OS 17_4 like Mac OS X) AppleWebKit/605.1.15 (KHTML, like Gecko) Version/17.4 Mobile/15E148 Safari/604.1"
	slackbot      = "Slackbot-LinkExpanding 1.0 (+https://api.slack.com/robots)"
)

// BenchmarkClassify: the agents of a desktop's and an iPhone's browser
// and of Slack's previewer (internal/rules' BenchmarkClassify reads the
// same ones).
func BenchmarkClassify(b *testing.B) {
	for _, bc := range []struct{ name, ua string }{
		{"chrome-desktop", chromeDesktop}, {"iphone-safari", iphoneSafari}, {"slackbot", slackbot},
	} {
		b.Run(bc.name, func(b *testing.B) {
			ua := []byte(bc.ua)
			b.ReportAllocs()
			for b.Loop() {
				Classify(ua)
			}
		})
	}
}
