// Package agent classifies an HTTP client by its User-Agent: what kind of
// client it is (Class), the platform it names (Platform) and the form of
// its device (Form). It is the one classifier of the product: the rules'
// devices condition (internal/rules) and the click events' bot and device
// (internal/events) both read it, so that a rule, an event and a use of a
// link agree on who clicked.
//
// Classify reads the agent once, one table step per byte, without
// allocating: the table is an Aho-Corasick automaton of the tokens of
// table.go, made a DFA over byte classes, each state with the signals of
// the tokens that end there (a kind of client, a platform, a form); the
// signals seen then decide the Agent, by a table of every set of them.
// It costs the same whatever the number of tokens, so the table can name
// every client worth naming; the hit path reads it through a memo.
//
// The rules of the table, and why:
//
//   - A client's kind is decided before its device: crawlers that render as
//     phones say so (Googlebot's smartphone agent names Android and
//     iPhone), and a Bot agent still gets the Platform and Form it names
//     (Googlebot smartphone is a Crawler, android, mobile), for events'
//     device; the rules map any Bot agent to their bot device regardless.
//   - In-app browsers (Facebook's FBAN/FBAV, Instagram, Pinterest,
//     Snapchat, LinkedIn, TikTok) are a Person on their phone's platform,
//     whatever else their agent says; the previewers of those services send
//     agents of their own (facebookexternalhit, Pinterestbot, Snap URL
//     Preview Service) and are Previewers. A previewer's own token is
//     precise for that reason: "pinterest/" alone would make Pinterest's
//     in-app browser a bot.
//   - When an agent names several kinds, the most specific wins: Person (an
//     in-app browser), then Previewer, Monitor, Prefetcher, Crawler, and
//     Library last, as libraries are what the others are built on
//     (LinkedInBot's agent names Apache-HttpClient; Pingdom's, "bot").
//   - Tokens do not count inside unrelated words: "cros" (ChromeOS) must
//     start a word, or "Microsoft Office Existence Discovery", a link
//     prefetcher, would read as a ChromeOS desktop; a bot token that ends a
//     phone's or a tablet's model ("CUBOT X19", "M bot 60") is not a bot.
//   - Platform: iOS (iPhone, iPod, iPad) before Android before a desktop
//     system (Windows NT, macOS, X11, ChromeOS, Linux), as iPhone agents
//     say "like Mac OS X" and Android agents say "Linux". iPadOS in its
//     default desktop mode sends a macOS agent and reads as desktop:
//     nothing in the agent tells them apart.
//   - Form: an iPad or a "Tablet" token is a tablet, and so is Android
//     without "Mobile" (Chrome's convention for tablets); an iPhone, an
//     iPod, "Mobi" or Android is mobile; a desktop system is desktop.
//   - Only what a client sends can be read: mail link scanners that send a
//     browser's agent (Mimecast, Proofpoint and the like) read as that
//     browser.
//   - An empty User-Agent is a Library: every browser sends one. A
//     non-empty agent of no known kind is Unknown (treated as a person),
//     and one that names a platform or a form is a Person.
//
// testdata/user-agents.tsv is the corpus the table is tested against, each
// agent with where it was documented or observed.
package agent
