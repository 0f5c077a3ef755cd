package redirect

import (
	"fmt"
	"net/url"
	"sync"
	"sync/atomic"

	"github.com/linkforge/linkforge/internal/explain"
	"github.com/linkforge/linkforge/internal/shortcode"
)

// Fallback annotations on a Namespace: where a request that matches none of
// its links is redirected instead of answered 404 or 410. Each holds an
// absolute http(s) URL.
const (
	// RootRedirectAnnotation: GET / on the namespace's vanity host.
	RootRedirectAnnotation = "linkforge.io/root-redirect"
	// NotFoundRedirectAnnotation: an unknown code of the namespace (or one
	// not active yet), and any other path on its vanity host.
	NotFoundRedirectAnnotation = explain.NotFoundRedirectAnnotation
	// GoneRedirectAnnotation: an expired or exhausted code of the namespace
	// (410 Gone otherwise).
	GoneRedirectAnnotation = explain.GoneRedirectAnnotation
)

// namespaceAnnotations are the annotations of a Namespace the redirector reads.
var namespaceAnnotations = []string{DomainAnnotation, RootRedirectAnnotation, NotFoundRedirectAnnotation, GoneRedirectAnnotation,
	CardTitleAnnotation, CardDescriptionAnnotation, CardImageAnnotation}

// fallbackKind is which fallback a request takes.
type fallbackKind uint8

const (
	fallbackRoot fallbackKind = iota
	fallbackNotFound
	fallbackGone
	numFallbacks
)

func (k fallbackKind) String() string {
	return [...]string{"root", "not_found", "gone"}[k]
}

func (k fallbackKind) annotation() string {
	return [...]string{RootRedirectAnnotation, NotFoundRedirectAnnotation, GoneRedirectAnnotation}[k]
}

// Fallbacks are the Location values of the fallback redirects, by kind; ""
// is none.
type Fallbacks [numFallbacks]string

// NewFallbacks checks the URLs of the root, not-found and gone fallbacks
// ("" for none) as spec.url is checked, and returns their Locations.
func NewFallbacks(root, notFound, gone string) (Fallbacks, error) {
	var f Fallbacks
	for k, u := range [...]string{root, notFound, gone} {
		loc, err := fallbackLocation(u)
		if err != nil {
			return Fallbacks{}, fmt.Errorf("%s redirect: %w", fallbackKind(k), err)
		}
		f[k] = loc
	}
	return f, nil
}

// CheckFallbackURL says what is wrong with a fallback URL, if anything:
// it is checked as spec.url is ("" is none).
func CheckFallbackURL(u string) error {
	_, err := fallbackLocation(u)
	return err
}

// fallbackLocation is the Location of a fallback URL: refused as spec.url
// is (only absolute http and https URLs, no control characters, no
// userinfo), written as the user wrote it.
func fallbackLocation(u string) (string, error) {
	if u == "" {
		return "", nil
	}
	if _, err := shortcode.Canonicalize(u); err != nil {
		return "", fmt.Errorf("invalid URL %q: %w", u, err)
	}
	return Location(u), nil
}

// CheckFallbackLoops refuses fallbacks that point back at the redirector
// itself, on the host of publicBaseURL: a fallback is taken for a code
// that does not answer, and a code that does not answer there takes the
// fallback again, forever (a browser gives up after about 20 redirects).
// Point fallbacks at pages outside linkforge.
func CheckFallbackLoops(f Fallbacks, publicBaseURL string) error {
	base, err := url.Parse(publicBaseURL)
	if err != nil || publicBaseURL == "" {
		return nil
	}
	for k, loc := range f {
		if err := fallbackLoop(loc, base.Host); err != nil {
			return fmt.Errorf("%s redirect: %w", fallbackKind(k), err)
		}
	}
	return nil
}

// fallbackLoop says whether fallback URL u is on one of the redirector's
// own hosts (a host with or without its port; "" is none).
func fallbackLoop(u string, self ...string) error {
	pu, err := url.Parse(u)
	if err != nil || u == "" {
		return nil
	}
	host := normalizeHost(pu.Host)
	for _, s := range self {
		if s = normalizeHost(s); s != "" && s == host {
			return fmt.Errorf("%q points back at the redirector (%s is its own host): a code that does not answer there would take the fallback again, in a loop; point it at a page outside linkforge", u, s)
		}
	}
	return nil
}

// fallbackTable maps namespaces to the fallbacks their annotations set.
// Reads load an immutable snapshot (one atomic load, no lock); writes
// (namespace events, rare) copy it under a mutex.
type fallbackTable struct {
	snap atomic.Pointer[map[string]*Fallbacks]
	mu   sync.Mutex
}

func newFallbackTable() *fallbackTable {
	t := &fallbackTable{}
	empty := map[string]*Fallbacks{}
	t.snap.Store(&empty)
	return t
}

// lookup returns the Location of namespace ns's fallback of kind k, or "".
func (t *fallbackTable) lookup(ns string, k fallbackKind) string {
	m := *t.snap.Load()
	if len(m) == 0 || ns == "" {
		return ""
	}
	if f := m[ns]; f != nil {
		return f[k]
	}
	return ""
}

// set records ns's fallbacks (none: forget it).
func (t *fallbackTable) set(ns string, f Fallbacks) {
	t.mu.Lock()
	defer t.mu.Unlock()
	cur := *t.snap.Load()
	old, had := cur[ns]
	if f == (Fallbacks{}) && !had || had && *old == f {
		return
	}
	next := make(map[string]*Fallbacks, len(cur)+1)
	for k, v := range cur {
		next[k] = v
	}
	if f == (Fallbacks{}) {
		delete(next, ns)
	} else {
		next[ns] = &f
	}
	t.snap.Store(&next)
}

// namespaceFallbacks reads a namespace's fallback annotations. A value
// that is not a valid URL, or that points at one of the redirector's own
// hosts (self: the public base's, the namespace's domain), is left out,
// and reported in errs by kind.
func namespaceFallbacks(annotations map[string]string, self ...string) (f Fallbacks, errs [numFallbacks]error) {
	for k := range numFallbacks {
		v, ok := annotations[k.annotation()]
		if !ok {
			continue
		}
		loc, err := fallbackLocation(v)
		if err == nil {
			err = fallbackLoop(loc, self...)
		}
		if err != nil {
			errs[k] = err
			continue
		}
		f[k] = loc
	}
	return f, errs
}
