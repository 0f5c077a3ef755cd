// Package explain says what the redirector answers for a link: the status
// and Location a click gets, and the same in words. The manager writes the
// words into the Ready condition (and its events), `kubectl linkforge open`
// and `get` print them, and the redirector's preview page ("+") shows them,
// so that the three say one thing, and the thing the redirect does: a
// table test in internal/redirect drives the real redirect handler for
// every state and routing feature and checks that the status and Location
// described are the ones sent.
//
// It reads a Link, which the manager and the CLI build from a ShortLink
// (FromShortLink) and the redirector from what its index holds. It is pure:
// no I/O, no clock of its own. What it cannot know it is told: the
// fallbacks that apply (Fallbacks); the redirectors' own --gone-redirect
// and --not-found-redirect are theirs alone, so the manager, which does not
// run with them, describes a namespace without fallback annotations as
// answering 404 and 410.
package explain

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/location"
	"github.com/linkforge/linkforge/internal/shortcode"
)

// Finish is why a link no longer redirects, if it has finished.
type Finish uint8

const (
	// Running: it has not finished (an expiry that has passed is read
	// from ExpiresAt, on the caller's clock, as the redirectors do).
	Running Finish = iota
	// Expired: its expiry has passed.
	Expired
	// Exhausted: it has served all of its maxUses.
	Exhausted
	// Idle: it was not used for its idleTimeout.
	Idle
	// Removed: it was deleted once it had finished; its code answers as a
	// finished link's for the redirectors' tombstone TTL.
	Removed
)

// Link is what the description reads of a link.
type Link struct {
	// Code is the code it answers under.
	Code string
	// Serves says the redirectors serve it under Code: the controller
	// confirmed Code for its current spec (or it is a tombstone).
	Serves bool
	// Status is the HTTP status of its redirects (301, 302, 307 or 308).
	Status int
	// Location is spec.url as the redirect sends it (location.Of).
	Location string
	// ForwardQuery and ForwardPath are spec.forwardQuery and forwardPath.
	ForwardQuery, ForwardPath bool
	// ExpiresAt is its expiry (zero: none); ActivatesAt spec.activatesAt
	// (zero: from the start).
	ExpiresAt, ActivatesAt time.Time
	// IdleTimeout is spec.idleTimeout (0: none).
	IdleTimeout time.Duration
	// Finish is how it finished, as the controller recorded it (or the
	// uses show it): an expiry is also read from ExpiresAt.
	Finish Finish
	// MaxUses is spec.maxUses (0: unlimited).
	MaxUses int64
	// Card says it has a spec.card.
	Card bool
	// ExpiredURL is spec.expiredURL as the redirect sends it ("": none).
	ExpiredURL string
	// Rules and Variants are how many rules and variants route its clicks.
	Rules, Variants int
	// Password and SignIn say the link is gated (spec.access): by a
	// password, by signed-in users or groups.
	Password, SignIn bool
	// VariantsEndAt and VariantsEndURL are spec.variantsEnd (zero: none):
	// from then on the split is over and its clicks go to the URL.
	VariantsEndAt  time.Time
	VariantsEndURL string
}

// Fallbacks are the fallback redirects that apply to the link's namespace,
// as Locations ("": none, or not known to the caller).
type Fallbacks struct {
	// NotFound takes the clicks of a code that does not answer (unknown,
	// or not active yet); Gone those of a finished link without an
	// expiredURL.
	NotFound, Gone string
}

// Fallback annotations on a Namespace, read by the redirectors (and by the
// manager, for its messages): where a click on an unknown or finished code
// of the namespace is redirected instead of answered 404 or 410.
const (
	NotFoundRedirectAnnotation = "linkforge.io/not-found-redirect"
	GoneRedirectAnnotation     = "linkforge.io/gone-redirect"
)

// NamespaceFallbacks are the fallbacks a namespace's annotations set, as the
// redirectors read them: a value that is not a valid URL is left out (the
// redirectors ignore it, and warn on the namespace).
func NamespaceFallbacks(annotations map[string]string) Fallbacks {
	valid := func(u string) string {
		if _, err := shortcode.Canonicalize(u); u == "" || err != nil {
			return ""
		}
		return location.Of(u)
	}
	return Fallbacks{NotFound: valid(annotations[NotFoundRedirectAnnotation]), Gone: valid(annotations[GoneRedirectAnnotation])}
}

// States of Answer.State beside status.state's words.
const (
	// StateRemoved: a finished link that was deleted; its code answers as
	// it did for a while.
	StateRemoved = "Removed"
	// StateNotServed: the redirectors do not serve the link: it holds no
	// code confirmed for its current spec.
	StateNotServed = "NotServed"
)

// Answer is what the redirector answers for a link at one instant.
type Answer struct {
	// State is what the link does, in a word: Active, Scheduled (not
	// active yet), Expired, Exhausted, Removed or NotServed.
	State string
	// Status and Location are what a GET of the short URL gets from a
	// person (not a link previewer) whose click matches none of its rules
	// and takes spec.url's share of a split, with no query and no path
	// after the code: a redirect (301, 302, 307, 308, with a Location),
	// 404 or 410 (without).
	Status   int
	Location string
	// Destination is where the link sends its clicks, for the preview
	// page: spec.url while it redirects, spec.expiredURL once it has
	// finished; "" when a fallback (or nothing) takes them, which hides
	// where it went.
	Destination string
	// Words say what the link's code answers, to follow "code X " in a
	// message or "It " on the preview page: "redirects to https://...
	// with 302 Found, ...".
	Words string
	// Previewers says what link previewers (chat apps, crawlers, mail
	// prefetchers) get when it is not what people get: "" otherwise.
	Previewers string
}

// Sentence is the answer in one sentence about code: "code X redirects
// to ...", and what previewers get.
func (a Answer) Sentence(code string) string {
	s := "code " + code + " " + a.Words
	if a.Previewers != "" {
		s += "; " + a.Previewers
	}
	return s
}

// Describe says what the redirectors answer for l at now, given the
// fallbacks of its namespace. The redirector decides in this order: a link
// not active yet answers as an unknown code, a finished one (or one whose
// expiry has passed on the redirector's clock) as finished, the others
// redirect.
func Describe(l Link, now time.Time, fb Fallbacks) Answer {
	if !l.Serves {
		a := unknown(fb)
		a.State = StateNotServed
		a.Words = "is not served: the link holds no code confirmed for its current spec, and the code answers as an unknown one (" + a.Words + ")"
		return a
	}
	finish := l.Finish
	if finish != Removed && !l.ExpiresAt.IsZero() && !now.Before(l.ExpiresAt) {
		finish = Expired // the redirectors read the expiry on their clock
	}
	waiting := finish != Removed && !l.ActivatesAt.IsZero() && now.Before(l.ActivatesAt)
	switch {
	case waiting && finish != Running:
		// The redirectors answer as for an unknown code until activatesAt,
		// finished or not.
		a := unknown(fb)
		done, then := finished(l, finish, fb)
		a.State = done.State
		a.Words = fmt.Sprintf("%s before it activates at %s: until then it answers like an unknown code (%s), then it %s",
			reason(l, finish), stamp(l.ActivatesAt), a.Words, then)
		return a
	case waiting:
		a := unknown(fb)
		a.State = string(linkv1.StateScheduled)
		a.Words = fmt.Sprintf("redirects from %s on, to %s; until then it answers like an unknown code (%s)",
			stamp(l.ActivatesAt), redirectWords(l, now), a.Words)
		a.Previewers = previewers(l)
		return a
	case finish != Running:
		a, _ := finished(l, finish, fb)
		return a
	}
	loc := l.Location
	if l.Variants > 0 && !l.VariantsEndAt.IsZero() && !now.Before(l.VariantsEndAt) {
		loc = l.VariantsEndURL // the test ended: its winner takes the clicks no rule routes
	}
	a := Answer{State: string(linkv1.StateActive), Status: l.Status, Location: loc, Destination: loc}
	a.Words = "redirects to " + redirectWords(l, now)
	a.Previewers = previewers(l)
	if gate := gateWords(l); gate != "" {
		// A person without a sign-in gets the form (200) or 403: what
		// a click gets before it passes, the redirect after.
		a.Words = gate + ", then " + a.Words
		switch {
		case l.Password:
			a.Status, a.Location = 200, ""
		default:
			a.Status, a.Location = 403, ""
		}
	}
	return a
}

// gateWords says what a gated link asks for before it redirects ("": no
// gate).
func gateWords(l Link) string {
	switch {
	case l.Password && l.SignIn:
		return "opens for its signed-in users and groups, and for whoever posts its password (200 OK: a form; the right one answers 303 See Other)"
	case l.Password:
		return "asks for its password (200 OK: a form; the right one answers 303 See Other)"
	case l.SignIn:
		return "opens only for its signed-in users and groups (403 Forbidden for anybody else, or a redirect to sign in)"
	}
	return ""
}

// redirectWords is where the link redirects and how: "URL with 302 Found,
// or by 2 rule(s) to their targets, ...".
func redirectWords(l Link, now time.Time) string {
	var b strings.Builder
	v := l.Variants
	ended := v > 0 && !l.VariantsEndAt.IsZero() && !now.Before(l.VariantsEndAt)
	if ended {
		b.WriteString(l.VariantsEndURL) // the test's winner takes the split's clicks
		v = 0
	} else {
		b.WriteString(l.Location)
	}
	b.WriteString(" with ")
	b.WriteString(statusText(l.Status))
	switch r := l.Rules; {
	case r > 0 && v > 0:
		fmt.Fprintf(&b, ", or by %d rule(s) to their targets, split with %d variant(s)", r, v)
	case r > 0:
		fmt.Fprintf(&b, ", or by %d rule(s) to their targets", r)
	case v > 0:
		fmt.Fprintf(&b, ", split with %d variant(s)", v)
	}
	if v > 0 && !l.VariantsEndAt.IsZero() {
		fmt.Fprintf(&b, " until %s, then all to %s", stamp(l.VariantsEndAt), l.VariantsEndURL)
	}
	if l.ForwardPath {
		b.WriteString(", adding what follows the code in the short URL to the path")
	}
	if l.ForwardQuery {
		b.WriteString(", adding the short URL's query string")
	}
	if !l.ExpiresAt.IsZero() {
		b.WriteString(" until ")
		b.WriteString(stamp(l.ExpiresAt))
	}
	if l.MaxUses > 0 {
		fmt.Fprintf(&b, ", for at most %d uses", l.MaxUses)
	}
	return b.String()
}

// previewers is what link previewers get when it is not the redirect: a
// link with a card, or with maxUses, shows them a card (a click they make
// is no use).
func previewers(l Link) string {
	switch {
	case l.Password || l.SignIn:
		return "link previewers (chat apps, crawlers) get a card (its own, its namespace's or a neutral one), never its destination"
	case l.Card:
		return "link previewers (chat apps, crawlers) get its card, not a redirect"
	case l.MaxUses > 0:
		return "link previewers (chat apps, crawlers) get a card (its namespace's, or a neutral one), not a redirect, and spend no use"
	}
	return ""
}

// finished is the answer of a link that has finished, and what it does
// then in words ("answers 410 Gone").
func finished(l Link, finish Finish, fb Fallbacks) (a Answer, then string) {
	a = Answer{State: finishState(finish)}
	switch {
	case l.ExpiredURL != "":
		// Ahead of any fallback, never cached.
		a.Status, a.Location, a.Destination = 302, l.ExpiredURL, l.ExpiredURL
		then = "redirects to " + l.ExpiredURL + " with " + statusText(302) + ", its spec.expiredURL"
	case fb.Gone != "":
		a.Status, a.Location = 302, fb.Gone
		then = "redirects to " + fb.Gone + " with " + statusText(302) + ", the fallback page for finished links"
	default:
		a.Status = 410
		then = "answers " + statusText(410)
	}
	a.Words = reason(l, finish) + " and " + then
	return a, then
}

func finishState(f Finish) string {
	switch f {
	case Exhausted:
		return string(linkv1.StateExhausted)
	case Removed:
		return StateRemoved
	}
	return string(linkv1.StateExpired) // expired, or idle
}

// reason says how the link finished.
func reason(l Link, f Finish) string {
	switch f {
	case Expired:
		return "expired at " + stamp(l.ExpiresAt)
	case Exhausted:
		if l.MaxUses > 0 {
			return fmt.Sprintf("served all %d uses", l.MaxUses)
		}
		return "served all of its uses"
	case Idle:
		if l.IdleTimeout > 0 {
			return fmt.Sprintf("was not used for its idleTimeout of %s", l.IdleTimeout)
		}
		return "was not used for its idle timeout"
	}
	return "finished and was deleted"
}

// unknown is what an unknown code of the namespace answers.
func unknown(fb Fallbacks) Answer {
	if fb.NotFound != "" {
		return Answer{Status: 302, Location: fb.NotFound,
			Words: "a redirect to " + fb.NotFound + " with " + statusText(302) + ", the fallback page for unknown codes"}
	}
	return Answer{Status: 404, Words: statusText(404)}
}

// statusText is "302 Found".
func statusText(status int) string {
	text := map[int]string{
		301: "Moved Permanently", 302: "Found", 307: "Temporary Redirect", 308: "Permanent Redirect",
		404: "Not Found", 410: "Gone",
	}[status]
	return strings.TrimSpace(strconv.Itoa(status) + " " + text)
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// FromShortLink is the Link of a ShortLink as its status stands: the
// manager calls it once it has written the status fields of a decision,
// the CLI on a link it read.
func FromShortLink(s *linkv1.ShortLink) Link {
	l := Link{
		Code:         s.Status.Code,
		Serves:       s.ServesConfirmedCode(),
		Status:       s.RedirectStatusCode(),
		Location:     location.Of(s.Spec.URL),
		ForwardQuery: s.Spec.ForwardQuery,
		ForwardPath:  s.Spec.ForwardPath,
		Card:         s.Spec.Card != nil,
		Rules:        len(s.Spec.Rules),
		Variants:     len(s.Spec.Variants),
	}
	if s.Spec.ExpiredURL != "" {
		l.ExpiredURL = location.Of(string(s.Spec.ExpiredURL))
	}
	if a := s.Spec.Access; a != nil {
		l.Password, l.SignIn = a.PasswordHash != "", len(a.Users)+len(a.Groups) > 0
	}
	if end := s.Spec.VariantsEnd; end != nil {
		l.VariantsEndAt, l.VariantsEndURL = end.At.Time, location.Of(end.URL)
	}
	if at, ok := s.Expiry(); ok {
		l.ExpiresAt = at
	}
	if at, ok := s.Activation(); ok {
		l.ActivatesAt = at
	}
	if s.Spec.IdleTimeout != nil {
		l.IdleTimeout = s.Spec.IdleTimeout.Duration
	}
	if s.Spec.MaxUses != nil {
		l.MaxUses = *s.Spec.MaxUses
	}
	switch {
	case s.Exhausted():
		l.Finish = Exhausted
	case s.Status.FinishedAt == nil:
	case !l.ExpiresAt.IsZero() && !s.Status.FinishedAt.Time.Before(l.ExpiresAt.Truncate(time.Second)):
		l.Finish = Expired
	case s.Spec.MaxUses != nil && s.Spec.IdleTimeout == nil:
		l.Finish = Exhausted // finished by its uses; its limit was raised since
	default:
		l.Finish = Idle
	}
	return l
}
