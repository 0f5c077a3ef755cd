package agent

import "math/bits"

// Agent is a client's classification, packed in 7 bits (a memo elsewhere
// stores it in a lock-free word): Class in the low 3 bits, Platform in the
// next 2, Form in the next 2.
type Agent uint8

// Bits is how many bits an Agent uses.
const Bits = 7

const (
	platformShift = 3
	formShift     = 5
)

func pack(c Class, p Platform, f Form) Agent {
	return Agent(c) | Agent(p)<<platformShift | Agent(f)<<formShift
}

// Class is the kind of client.
func (a Agent) Class() Class { return Class(a & 7) }

// Platform is the platform the agent names.
func (a Agent) Platform() Platform { return Platform(a>>platformShift) & 3 }

// Form is the form of the device the agent names.
func (a Agent) Form() Form { return Form(a>>formShift) & 3 }

// Bot reports whether no person drives the client: its Class is neither
// Person nor Unknown. It is events' bot and rules' bot device.
func (a Agent) Bot() bool { c := a.Class(); return c != Person && c != Unknown }

// Reads reports whether the client reads a link without following it for
// a person (a Previewer, Crawler, Prefetcher or Monitor): a click of such
// a client is never a use of a limited link. A Library is not one of them:
// a person may run curl.
func (a Agent) Reads() bool {
	switch a.Class() {
	case Previewer, Crawler, Prefetcher, Monitor:
		return true
	}
	return false
}

// Class is a kind of HTTP client.
type Class uint8

const (
	// Unknown: a non-empty agent of no known kind, treated as a person.
	Unknown Class = iota
	// Person: a browser, or an app's in-app browser, driven by a person.
	Person
	// Previewer: a chat or social network's link unfurler (Slack,
	// Facebook, WhatsApp, LinkedIn, Discord, Telegram, X, Teams, iMessage,
	// Signal, Mastodon, Pinterest, Snapchat, Reddit ...).
	Previewer
	// Crawler: a search engine, an archiver, an AI or SEO crawler.
	Crawler
	// Prefetcher: a mail or office link scanner or prefetcher, a headless
	// browser (Microsoft Office, Google's image proxy and Read Aloud,
	// HeadlessChrome, Lighthouse).
	Prefetcher
	// Monitor: an uptime monitor or a health probe.
	Monitor
	// Library: an HTTP library or command-line tool, or an empty agent
	// (every browser sends one).
	Library
	numClasses
)

// unknownName is the name of what is not known: a Class, Platform or Form.
const unknownName = "unknown"

var classNames = [numClasses]string{unknownName, "person", "previewer", "crawler", "prefetcher", "monitor", "library"}

// String is the class's name, as metric labels and the docs use it.
func (c Class) String() string {
	if c < numClasses {
		return classNames[c]
	}
	return unknownName
}

// Platform is the platform an agent names.
type Platform uint8

const (
	PlatformUnknown Platform = iota
	PlatformIOS
	PlatformAndroid
	// PlatformDesktop: Windows, macOS, Linux desktops and ChromeOS.
	PlatformDesktop
)

var platformNames = [...]string{unknownName, "ios", "android", "desktop"}

// String is the platform's name: unknown, ios, android or desktop.
func (p Platform) String() string { return platformNames[p&3] }

// Form is the form of a device: events' device.
type Form uint8

const (
	FormUnknown Form = iota
	FormDesktop
	FormMobile
	FormTablet
)

var formNames = [...]string{unknownName, "desktop", "mobile", "tablet"}

// String is the form's name: unknown, desktop, mobile or tablet.
func (f Form) String() string { return formNames[f&3] }

// Classify reads a User-Agent's Agent. It reads the agent once, one table
// step per byte whatever the number of tokens, ignores ASCII case, does not
// allocate and is safe for concurrent use.
func Classify(userAgent []byte) Agent {
	if len(userAgent) == 0 {
		return emptyAgent
	}
	return agentOf[table.scan(userAgent)&(1<<numSignals-1)] // no bounds check
}

// emptyAgent is the Agent of an empty User-Agent.
var emptyAgent = pack(Library, PlatformUnknown, FormUnknown)

// agentOf is decide's answer for every set of signals, so that Classify
// ends with a load.
var agentOf = func() (t [1 << numSignals]Agent) {
	for s := range t {
		t[s] = decide(signal(s))
	}
	return t
}()

// decide is the Agent of an agent in which the tokens of signals s occur:
// the rules of the package documentation.
func decide(s signal) Agent {
	platform := PlatformUnknown
	switch {
	case s&(phoneIOS|tabletIOS) != 0:
		platform = PlatformIOS
	case s&androidOS != 0:
		platform = PlatformAndroid
	case s&desktopOS != 0:
		platform = PlatformDesktop
	}
	form := FormUnknown
	switch {
	case s&(tabletIOS|tabletWord) != 0, s&androidOS != 0 && s&mobileWord == 0:
		form = FormTablet
	case s&(phoneIOS|mobileWord|androidOS) != 0:
		form = FormMobile
	case platform == PlatformDesktop:
		form = FormDesktop
	}
	class := Unknown
	if kinds := s & kindSignals; kinds != 0 {
		class = kindClass[bits.TrailingZeros16(uint16(kinds))]
	} else if platform != PlatformUnknown || form != FormUnknown {
		class = Person
	}
	return pack(class, platform, form)
}
