package agent

// signal is what the tokens found in an agent say of it, a bit each.
type signal uint16

const (
	// The kinds, most specific first: the lowest one seen is the Class
	// (kindClass).
	inApp signal = 1 << iota
	previewer
	monitor
	prefetcher
	crawler
	library

	phoneIOS   // iPhone, iPod
	tabletIOS  // iPad
	androidOS  // Android
	desktopOS  // Windows NT, macOS, X11, ChromeOS, Linux
	mobileWord // Mobi, Mobile
	tabletWord // Tablet
)

const (
	numSignals  = 12
	kindSignals = inApp | previewer | monitor | prefetcher | crawler | library
)

// kindClass is the Class of each kind signal, by bit.
var kindClass = [...]Class{Person, Previewer, Monitor, Prefetcher, Crawler, Library}

// token is a lower-case word whose occurrence in an agent (ASCII case
// ignored) gives the agent its signals. A leading '^' says the word must
// start a word of the agent: after its start or a byte that is not an
// ASCII letter or digit.
type token struct {
	text string
	says signal
}

// tokens is the classification table. Its order does not matter: every
// token found counts, and decide weighs what they say. Previewers' tokens
// are theirs alone (Pinterest's bot says "Pinterest/0.", its in-app
// browser "[Pinterest/"), the generic words of each kind come last.
var tokens = []token{
	// In-app browsers: a person, on the phone the agent names.
	{"fban/", inApp}, {"fbav/", inApp}, {"fb_iab/", inApp}, // Facebook, Messenger
	{"instagram ", inApp},
	{"[pinterest/", inApp},
	{"snapchat/", inApp},
	{"linkedinapp", inApp}, {"linkedin/", inApp}, // "LinkedInBot/" is its previewer
	{"musical_ly", inApp}, {"bytedancewebview", inApp}, // TikTok

	// Link previewers of chats and social networks.
	{"slackbot", previewer}, {"slack-imgproxy", previewer},
	{"facebookexternalhit", previewer}, {"facebot", previewer}, {"meta-externalhit", previewer}, {"meta-externalfetcher", previewer},
	{"whatsapp", previewer}, // WhatsApp's, and Signal's (it sends "WhatsApp/2")
	{"linkedinbot", previewer},
	{"discordbot", previewer},
	{"telegrambot", previewer},
	{"twitterbot", previewer},      // X; iMessage sends "facebookexternalhit/1.1 Facebot Twitterbot/1.0"
	{"skypeuripreview", previewer}, // Teams, Skype
	{"mastodon/", previewer}, {"pleroma", previewer},
	{"pinterestbot", previewer}, {"pinterest/0.", previewer},
	{"snap url preview", previewer}, {"snapurlpreview", previewer},
	{"redditbot", previewer},
	{"vkshare", previewer},
	{"kakaotalk-scrap", previewer}, {"line-poker", previewer},
	{"embedly", previewer}, {"iframely", previewer},
	{"bingpreview", previewer}, {"microsoftpreview", previewer},
	{"google web preview", previewer},
	{"developers.google.com/+/web/snippet", previewer}, // Google Chat's and Android Messages' snippets
	{"yahoo link preview", previewer},

	// Uptime monitors and health probes.
	{"uptimerobot", monitor}, {"pingdom", monitor}, {"statuscake", monitor},
	{"better uptime", monitor}, {"betteruptime", monitor},
	{"datadogsynthetics", monitor}, {"datadog synthetic", monitor},
	{"site24x7", monitor}, {"checkly", monitor}, {"newrelicsynthetics", monitor},
	{"uptime-kuma", monitor}, {"kube-probe/", monitor}, {"elb-healthchecker/", monitor},
	{"googlestackdrivermonitoring", monitor}, {"blackbox exporter/", monitor},
	{"sentryuptimebot", monitor}, {"ohdear", monitor}, {"hetrixtools", monitor}, {"jetmon/", monitor},
	{"uptime", monitor}, {"monitor", monitor},

	// Mail and office link scanners and prefetchers, headless browsers.
	{"microsoft office", prefetcher}, {"ms-office", prefetcher}, {"msoffice", prefetcher},
	{"googleimageproxy", prefetcher}, // Gmail's
	{"feedfetcher-google", prefetcher}, {"google-read-aloud", prefetcher},
	{"headless", prefetcher}, {"lighthouse", prefetcher}, {"phantomjs", prefetcher},

	// Crawlers whose names have no generic word.
	{"mediapartners-google", crawler}, {"apis-google", crawler}, {"google-inspectiontool", crawler},
	{"googleother", crawler}, {"google-extended", crawler}, {"google-safety", crawler},
	{"google favicon", crawler}, {"google-site-verification", crawler}, {"googleproducer", crawler},
	{"facebookcatalog", crawler}, {"meta-externalagent", crawler}, {"meta-externalads", crawler}, {"meta-webindexer", crawler},
	{"chatgpt-user", crawler}, {"perplexity-user", crawler}, {"claude-user", crawler}, {"claude-web", crawler}, {"anthropic-ai", crawler},
	{"heritrix", crawler}, {"qwantify", crawler}, {"yandex.com/bots", crawler},
	{"google search console", crawler},
	// Generic words: Googlebot, bingbot, Applebot, YandexBot, DuckDuckBot,
	// Baiduspider, Yahoo! Slurp, ia_archiver, GPTBot, ClaudeBot, AhrefsBot ...
	{"bot", crawler}, {"crawl", crawler}, {"spider", crawler}, {"slurp", crawler}, {"archiver", crawler},

	// HTTP libraries and command-line tools.
	{"curl/", library}, {"wget/", library}, {"httpie/", library},
	{"python-requests", library}, {"python-urllib", library}, {"aiohttp/", library}, {"python-httpx", library},
	{"http-client", library}, {"httpclient", library}, // Go-http-client, Java-http-client, Apache-HttpClient
	{"^java/", library}, {"okhttp", library},
	{"axios/", library}, {"node-fetch", library}, {"undici", library},
	{"postmanruntime", library}, {"insomnia/", library},
	{"libwww-perl", library}, {"scrapy", library}, {"guzzlehttp", library}, {"(dart:io)", library},

	// Platforms and forms.
	{"iphone", phoneIOS}, {"ipod", phoneIOS}, {"ipad", tabletIOS},
	{"android", androidOS},
	{"windows nt", desktopOS}, {"macintosh", desktopOS}, {"mac os x", desktopOS}, {"x11", desktopOS},
	{"^cros", desktopOS}, {"linux", desktopOS},
	{"mobi", mobileWord}, {"tablet", tabletWord},
	{"opera mini", mobileWord}, // a phone's browser, Mobi or not
}

// notTokens are words that end in a token without saying what it says: a
// token that ends where one of them ends does not count. CUBOT is a brand
// of Android phones whose model names ("CUBOT X19") end in "bot", and
// "M bot 60" and "M BOT TAB 101" are models of Android phones and tablets.
var notTokens = []string{"cubot", "; m bot"}
