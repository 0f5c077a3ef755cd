// Package rules is where a click on a ShortLink goes: its redirect rules
// (spec.rules, first match wins), its weighted variants (spec.variants) and
// its default (spec.url), plus the helpers the redirector needs for
// spec.forwardPath. Like internal/claim it is pure: no I/O, no clock of its
// own, no shared state.
//
// Compile turns a link's spec into a Compiled once, when the informer
// delivers the link; Evaluate reads a request's Facts against it on every
// click without allocating. The manager uses Targets and Key to validate
// every target and to keep links with different routing from sharing a code.
//
// What the conditions can be trusted for: every fact but the time and the
// country is whatever the client sends. A User-Agent, an Accept-Language,
// a query parameter or a header routes people who do not lie about them
// (an iPhone to the App Store, a German browser to the German page); anyone
// can send any of them, so a rule must never guard a destination that a
// client should not reach. The country is as good as the header the
// operator names for it: set by an ingress or CDN that overwrites what the
// client sent, it is the CDN's geolocation; the redirector reads none unless
// told which header to trust. The time is the redirector's clock.
package rules
