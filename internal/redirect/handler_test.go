package redirect

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
	"time"
	"unsafe"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	clocktesting "k8s.io/utils/clock/testing"
	"k8s.io/utils/ptr"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/rules"
	"github.com/linkforge/linkforge/internal/testenv"
)

// fakeInformer hands the redirector's event handlers to a test, which calls
// them with transformed objects the way an informer would.
type fakeInformer struct {
	h      toolscache.ResourceEventHandler
	synced bool
}

func (f *fakeInformer) AddEventHandler(h toolscache.ResourceEventHandler) (toolscache.ResourceEventHandlerRegistration, error) {
	f.h = h
	return f, nil
}
func (f *fakeInformer) HasSynced() bool { return f.synced }
func (f *fakeInformer) HasSyncedChecker() toolscache.DoneChecker {
	panic("not used")
}

func transformed(obj any) any {
	out, err := Transform(obj)
	if err != nil {
		panic(err)
	}
	return out
}

// harness is a Redirector fed through fake informers, on a fake clock.
type harness struct {
	t     *testing.T
	r     *Redirector
	clock *clocktesting.FakeClock
	links *fakeInformer
	nss   *fakeInformer
	log   *testenv.SyncBuffer
}

var epoch = time.Date(2026, 6, 1, 12, 0, 0, 0, time.UTC)

func newHarness(t *testing.T) *harness {
	t.Helper()
	h := &harness{t: t, clock: clocktesting.NewFakeClock(epoch), links: &fakeInformer{}, nss: &fakeInformer{}, log: &testenv.SyncBuffer{}}
	h.r = New(Options{TombstoneTTL: 24 * time.Hour, Clock: h.clock, Registry: prometheus.NewRegistry(), AccessLog: h.log})
	if err := h.r.WatchShortLinks(h.links); err != nil {
		t.Fatal(err)
	}
	if err := h.r.WatchNamespaces(h.nss); err != nil {
		t.Fatal(err)
	}
	h.links.synced, h.nss.synced = true, true
	return h
}

func (h *harness) add(l *linkv1.ShortLink) *linkv1.ShortLink {
	h.links.h.OnAdd(transformed(l), true)
	return l
}

func (h *harness) update(old, cur *linkv1.ShortLink) {
	h.links.h.OnUpdate(transformed(old), transformed(cur))
}

func (h *harness) del(l *linkv1.ShortLink) {
	h.links.h.OnDelete(toolscache.DeletedFinalStateUnknown{Key: l.Namespace + "/" + l.Name, Obj: transformed(l)})
}

func (h *harness) addNS(ns *corev1.Namespace) { h.nss.h.OnAdd(transformed(ns), true) }

func (h *harness) do(method, host, target string) *http.Response {
	req := httptest.NewRequest(method, target, nil)
	if host != "" {
		req.Host = host
	}
	rec := httptest.NewRecorder()
	h.r.ServeHTTP(rec, req)
	return rec.Result()
}

// link builds a ShortLink as the controller leaves it: status.code set and
// Ready=True with reason CodeAssigned, created an hour before epoch.
func link(ns, name, code, url string, mut ...func(*linkv1.ShortLink)) *linkv1.ShortLink {
	l := &linkv1.ShortLink{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ns, Name: name, ResourceVersion: "1", UID: types.UID("uid-" + name), Generation: 1,
			CreationTimestamp: metav1.NewTime(epoch.Add(-time.Hour)),
			Labels:            map[string]string{"team": "a"},
			Annotations:       map[string]string{"kubectl.kubernetes.io/last-applied-configuration": "{}"},
			ManagedFields:     []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
		},
		Spec: linkv1.ShortLinkSpec{URL: url},
		Status: linkv1.ShortLinkStatus{
			Code:                code,
			CanonicalURL:        url,
			ObservedGeneration:  1,
			ConfirmedGeneration: 1,
			Conditions: []metav1.Condition{{
				Type: linkv1.ConditionReady, Status: metav1.ConditionTrue, Reason: linkv1.ReasonCodeAssigned,
				Message: "code assigned", LastTransitionTime: metav1.NewTime(epoch),
			}},
		},
	}
	for _, m := range mut {
		m(l)
	}
	return l
}

// decided sets what the controller writes for a decision with the given
// Ready reason: the condition, for people, and the typed fields the
// redirector reads (confirmedGeneration, finishedAt).
func decided(reason string) func(*linkv1.ShortLink) {
	return func(l *linkv1.ShortLink) {
		ready := metav1.ConditionFalse
		l.Status.ConfirmedGeneration, l.Status.FinishedAt = 0, nil
		switch reason {
		case linkv1.ReasonCodeAssigned:
			ready = metav1.ConditionTrue
			l.Status.ConfirmedGeneration = l.Generation
		case linkv1.ReasonExpired, linkv1.ReasonExhausted:
			ready = metav1.ConditionTrue // finished, as its spec asks
			l.Status.ConfirmedGeneration = l.Generation
			l.Status.FinishedAt = &metav1.Time{Time: epoch.Add(-time.Minute)}
		}
		meta.SetStatusCondition(&l.Status.Conditions, metav1.Condition{
			Type: linkv1.ConditionReady, Status: ready, Reason: reason, Message: "set by the test",
			ObservedGeneration: l.Generation,
		})
	}
}

func created(t time.Time) func(*linkv1.ShortLink) {
	return func(l *linkv1.ShortLink) { l.CreationTimestamp = metav1.NewTime(t) }
}

func rv(v string) func(*linkv1.ShortLink) {
	return func(l *linkv1.ShortLink) { l.ResourceVersion = v }
}

type want struct {
	status       int
	location     string
	cacheControl string
	allow        string
	body         string // substring; "" checks an empty body for HEAD
}

func check(t *testing.T, name string, resp *http.Response, w want, head bool) {
	t.Helper()
	body, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != w.status {
		t.Errorf("%s: status %d, want %d (body %q)", name, resp.StatusCode, w.status, body)
	}
	if got := resp.Header.Get("Location"); got != w.location {
		t.Errorf("%s: Location %q, want %q", name, got, w.location)
	}
	if got := resp.Header.Get("Cache-Control"); got != w.cacheControl {
		t.Errorf("%s: Cache-Control %q, want %q", name, got, w.cacheControl)
	}
	if got := resp.Header.Get("Allow"); got != w.allow {
		t.Errorf("%s: Allow %q, want %q", name, got, w.allow)
	}
	if got := resp.Header.Get("Content-Type"); got != "text/plain; charset=utf-8" {
		t.Errorf("%s: Content-Type %q", name, got)
	}
	if head {
		if len(body) != 0 {
			t.Errorf("%s: HEAD has a body %q", name, body)
		}
	} else if !strings.Contains(string(body), w.body) || len(body) > 200 || strings.Contains(string(body), "goroutine") {
		t.Errorf("%s: body %q, want a short text with %q", name, body, w.body)
	}
}

// handlerLinks are the links of TestHandler, and two namespaces for the
// domain routes (TestOddTargets serves them all).
func handlerLinks(h *harness) {
	const ns = "team-a"
	h.add(link(ns, "default", "dflt", "https://example.com/default"))
	for _, st := range []int32{301, 302, 307, 308} {
		h.add(link(ns, "s"+strconv.Itoa(int(st)), "s"+strconv.Itoa(int(st)), "https://example.com/"+strconv.Itoa(int(st)),
			func(l *linkv1.ShortLink) { l.Spec.RedirectStatus = st }))
	}
	h.add(link(ns, "spaces", "enc", "  https://example.com/a b/caf\u00e9?q=\u00fc#top \t"))
	h.add(link(ns, "fq", "fq", "https://example.com/p?a=1#frag", func(l *linkv1.ShortLink) { l.Spec.ForwardQuery = true }))
	h.add(link(ns, "fq-noq", "fqnoq", "https://example.com/p#frag", func(l *linkv1.ShortLink) { l.Spec.ForwardQuery = true }))
	h.add(link(ns, "no-fq", "nofq", "https://example.com/p?a=1"))
	h.add(link(ns, "expired", "expired", "https://example.com/x",
		func(l *linkv1.ShortLink) { l.Spec.ExpiresAt = ptr.To(metav1.NewTime(epoch.Add(-time.Second))) }))
	h.add(link(ns, "ttl-expired", "ttlexp", "https://example.com/x",
		func(l *linkv1.ShortLink) { l.Spec.TTL = &metav1.Duration{Duration: 30 * time.Minute} }))
	h.add(link(ns, "ttl-live", "ttllive", "https://example.com/live",
		func(l *linkv1.ShortLink) { l.Spec.TTL = &metav1.Duration{Duration: 2 * time.Hour} }))
	h.add(link(ns, "exhausted", "exhausted", "https://example.com/x",
		func(l *linkv1.ShortLink) { l.Spec.MaxUses = ptr.To[int64](3); l.Status.Uses = 3 }))
	h.add(link(ns, "uses-left", "usesleft", "https://example.com/uses",
		func(l *linkv1.ShortLink) {
			l.Spec.MaxUses = ptr.To[int64](3)
			l.Status.Uses = 2
			l.Spec.RedirectStatus = 301
		}))
	h.add(link(ns, "perm-expiring", "permexp", "https://example.com/perm", func(l *linkv1.ShortLink) {
		l.Spec.RedirectStatus = 308
		l.Spec.ExpiresAt = ptr.To(metav1.NewTime(epoch.Add(10 * time.Minute)))
	}))
	h.add(link(ns, "said-expired", "saidexp", "https://example.com/x", decided(linkv1.ReasonExpired)))
	h.add(link(ns, "pending", "pending", "https://example.com/x", decided(linkv1.ReasonProgressing)))
	h.add(link(ns, "conflict", "conflict", "https://example.com/x", decided(linkv1.ReasonCodeConflict)))
	h.add(link(ns, "unconfirmed", "noready", "https://example.com/x", func(l *linkv1.ShortLink) { l.Status.Conditions, l.Status.ConfirmedGeneration = nil, 0 }))
	h.add(link("team-b", "docs", "docs", "https://example.com/b-docs"))
	h.add(link("team-c", "docs", "docs", "https://example.com/c-docs"))
	h.addNS(nsObj("team-c", epoch.Add(-48*time.Hour), "go.c.example.com"))
}

func TestHandler(t *testing.T) {
	h := newHarness(t)
	handlerLinks(h)

	const (
		noStore = "no-store"
		noCache = "private, no-cache"
		public  = "public, max-age=3600"
	)
	for _, tc := range []struct {
		name, method, host, target string
		want                       want
	}{
		{"default status is 302", "GET", "", "/team-a/dflt", want{302, "https://example.com/default", noCache, "", "Found"}},
		{"301", "GET", "", "/team-a/s301", want{301, "https://example.com/301", public, "", "Moved Permanently"}},
		{"302", "GET", "", "/team-a/s302", want{302, "https://example.com/302", noCache, "", "Found"}},
		{"307", "GET", "", "/team-a/s307", want{307, "https://example.com/307", noCache, "", "Temporary Redirect"}},
		{"308", "GET", "", "/team-a/s308", want{308, "https://example.com/308", public, "", "Permanent Redirect"}},
		{"HEAD 301", "HEAD", "", "/team-a/s301", want{301, "https://example.com/301", public, "", ""}},
		{"HEAD 404", "HEAD", "", "/team-a/nope", want{404, "", noStore, "", ""}},
		{"Location as written, trimmed, percent-encoded", "GET", "", "/team-a/enc",
			want{302, "https://example.com/a%20b/caf%C3%A9?q=%C3%BC#top", noCache, "", "Found"}},
		{"forwardQuery onto an existing query, before the fragment", "GET", "", "/team-a/fq?b=2&c=%20",
			want{302, "https://example.com/p?a=1&b=2&c=%20#frag", noCache, "", "Found"}},
		{"forwardQuery without a target query", "GET", "", "/team-a/fqnoq?b=2",
			want{302, "https://example.com/p?b=2#frag", noCache, "", "Found"}},
		{"forwardQuery without a request query", "GET", "", "/team-a/fq",
			want{302, "https://example.com/p?a=1#frag", noCache, "", "Found"}},
		{"query not forwarded by default", "GET", "", "/team-a/nofq?b=2",
			want{302, "https://example.com/p?a=1", noCache, "", "Found"}},
		{"POST is 405", "POST", "", "/team-a/dflt", want{405, "", noStore, "GET, HEAD", "Method Not Allowed"}},
		{"DELETE is 405", "DELETE", "", "/team-a/dflt", want{405, "", noStore, "GET, HEAD", "Method Not Allowed"}},
		{"unknown namespace", "GET", "", "/team-b/dflt", want{404, "", noStore, "", "Not Found"}},
		{"unknown code", "GET", "", "/team-a/nope", want{404, "", noStore, "", "Not Found"}},
		{"root", "GET", "", "/", want{404, "", noStore, "", "Not Found"}},
		{"single segment without a domain", "GET", "", "/dflt", want{404, "", noStore, "", "Not Found"}},
		{"extra segment", "GET", "", "/team-a/dflt/x", want{404, "", noStore, "", "Not Found"}},
		{"trailing slash", "GET", "", "/team-a/", want{404, "", noStore, "", "Not Found"}},
		{"expired by the clock although Ready", "GET", "", "/team-a/expired", want{410, "", noStore, "", "Gone"}},
		{"expired by ttl from creation", "GET", "", "/team-a/ttlexp", want{410, "", noStore, "", "Gone"}},
		{"ttl not reached", "GET", "", "/team-a/ttllive", want{302, "https://example.com/live", noCache, "", "Found"}},
		{"exhausted", "GET", "", "/team-a/exhausted", want{410, "", noStore, "", "Gone"}},
		{"uses left; 301 with maxUses is not cacheable", "GET", "", "/team-a/usesleft",
			want{301, "https://example.com/uses", noCache, "", "Moved"}},
		{"308 cacheable until expiry only", "GET", "", "/team-a/permexp",
			want{308, "https://example.com/perm", "public, max-age=600", "", "Permanent"}},
		{"controller says Expired", "GET", "", "/team-a/saidexp", want{410, "", noStore, "", "Gone"}},
		{"pending hold not served", "GET", "", "/team-a/pending", want{404, "", noStore, "", "Not Found"}},
		{"conflicting link not served", "GET", "", "/team-a/conflict", want{404, "", noStore, "", "Not Found"}},
		{"link without a confirmed code not served", "GET", "", "/team-a/noready", want{404, "", noStore, "", "Not Found"}},
	} {
		check(t, tc.name, h.do(tc.method, tc.host, tc.target), tc.want, tc.method == "HEAD")
	}
}

func TestTombstones(t *testing.T) {
	h := newHarness(t)
	exp := link("ns", "old", "gone", "https://example.com/x",
		func(l *linkv1.ShortLink) { l.Spec.ExpiresAt = ptr.To(metav1.NewTime(epoch.Add(time.Minute))) })
	h.add(exp)
	ex := h.add(link("ns", "used", "used", "https://example.com/y",
		func(l *linkv1.ShortLink) { l.Spec.MaxUses = ptr.To[int64](1); l.Status.Uses = 1 }))
	live := h.add(link("ns", "live", "live", "https://example.com/z"))

	check(t, "before expiry", h.do("GET", "", "/ns/gone"), want{302, "https://example.com/x", "private, no-cache", "", "Found"}, false)
	h.clock.Step(2 * time.Minute)
	check(t, "expired", h.do("GET", "", "/ns/gone"), want{410, "", "no-store", "", "Gone"}, false)

	h.del(exp)
	h.del(ex)
	h.del(live)
	if h.r.Index().Tombstones() != 2 || h.r.Index().Links() != 0 {
		t.Fatalf("tombstones %d links %d, want 2 and 0", h.r.Index().Tombstones(), h.r.Index().Links())
	}
	check(t, "expired, deleted", h.do("GET", "", "/ns/gone"), want{410, "", "no-store", "", "Gone"}, false)
	check(t, "exhausted, deleted", h.do("GET", "", "/ns/used"), want{410, "", "no-store", "", "Gone"}, false)
	check(t, "live, deleted: no tombstone", h.do("GET", "", "/ns/live"), want{404, "", "no-store", "", "Not Found"}, false)

	h.clock.Step(24*time.Hour - time.Second)
	check(t, "tombstone just before its TTL", h.do("GET", "", "/ns/gone"), want{410, "", "no-store", "", "Gone"}, false)
	h.clock.Step(time.Second)
	check(t, "tombstone after its TTL", h.do("GET", "", "/ns/gone"), want{404, "", "no-store", "", "Not Found"}, false)
	h.r.Index().SweepTombstones(h.clock.Now())
	if n := h.r.Index().Tombstones(); n != 0 {
		t.Errorf("%d tombstones after the sweep", n)
	}

	// A new link taking the code replaces a tombstone.
	h.add(exp)
	h.clock.Step(-24 * time.Hour)
	h.del(link("ns", "old", "gone", "https://example.com/x", decided(linkv1.ReasonExpired)))
	check(t, "finished by the controller, deleted", h.do("GET", "", "/ns/gone"), want{410, "", "no-store", "", "Gone"}, false)
	h.add(link("ns", "new", "gone", "https://example.com/new"))
	check(t, "new holder over a tombstone", h.do("GET", "", "/ns/gone"), want{302, "https://example.com/new", "private, no-cache", "", "Found"}, false)
}

func TestUpdates(t *testing.T) {
	h := newHarness(t)
	v1 := h.add(link("ns", "a", "code1", "https://example.com/v1"))
	v2 := link("ns", "a", "code1", "https://example.com/v2", rv("2"))
	h.update(v1, v2)
	check(t, "URL change", h.do("GET", "", "/ns/code1"), want{302, "https://example.com/v2", "private, no-cache", "", ""}, false)
	v3 := link("ns", "a", "code2", "https://example.com/v3", rv("3"))
	h.update(v2, v3)
	check(t, "code change: old code", h.do("GET", "", "/ns/code1"), want{404, "", "no-store", "", ""}, false)
	check(t, "code change: new code", h.do("GET", "", "/ns/code2"), want{302, "https://example.com/v3", "private, no-cache", "", ""}, false)
	v4 := link("ns", "a", "code2", "https://example.com/v3", rv("4"), decided(linkv1.ReasonCodeConflict))
	h.update(v3, v4)
	check(t, "hold lost", h.do("GET", "", "/ns/code2"), want{404, "", "no-store", "", ""}, false)
	if h.r.Index().Links() != 0 {
		t.Errorf("index holds %d links", h.r.Index().Links())
	}
}

func TestTwoHoldersServeTheWinner(t *testing.T) {
	older := link("ns", "zz-older", "same", "https://example.com/older", created(epoch.Add(-2*time.Hour)))
	younger := link("ns", "aa-younger", "same", "https://example.com/younger", created(epoch.Add(-time.Hour)))
	tieA := link("ns", "a", "tie", "https://example.com/a")
	tieB := link("ns", "b", "tie", "https://example.com/b")
	for _, order := range [][]*linkv1.ShortLink{{older, younger, tieA, tieB}, {younger, older, tieB, tieA}} {
		h := newHarness(t)
		for _, l := range order {
			h.add(l)
		}
		check(t, "older link wins", h.do("GET", "", "/ns/same"), want{302, "https://example.com/older", "private, no-cache", "", ""}, false)
		check(t, "same age: smaller name wins", h.do("GET", "", "/ns/tie"), want{302, "https://example.com/a", "private, no-cache", "", ""}, false)
		h.del(older)
		check(t, "the other holder after the winner left", h.do("GET", "", "/ns/same"), want{302, "https://example.com/younger", "private, no-cache", "", ""}, false)
		h.add(older)
		check(t, "winner back", h.do("GET", "", "/ns/same"), want{302, "https://example.com/older", "private, no-cache", "", ""}, false)
		if n := h.r.Index().Links(); n != 2 {
			t.Errorf("links %d, want 2", n)
		}
	}
}

func TestUnconfirmedHolderNotServed(t *testing.T) {
	h := newHarness(t)
	pending := link("ns", "older-pending", "c", "https://example.com/pending",
		created(epoch.Add(-3*time.Hour)), decided(linkv1.ReasonProgressing))
	h.add(pending)
	check(t, "only an unconfirmed holder", h.do("GET", "", "/ns/c"), want{404, "", "no-store", "", ""}, false)
	h.add(link("ns", "confirmed", "c", "https://example.com/confirmed"))
	check(t, "confirmed holder served over an older pending one", h.do("GET", "", "/ns/c"),
		want{302, "https://example.com/confirmed", "private, no-cache", "", ""}, false)
}

func nsObj(name string, created time.Time, domain string) *corev1.Namespace {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: name, CreationTimestamp: metav1.NewTime(created), ResourceVersion: "1",
		Labels: map[string]string{"kubernetes.io/metadata.name": name},
	}}
	if domain != "" {
		ns.Annotations = map[string]string{DomainAnnotation: domain, "other": "x"}
	}
	return ns
}

func TestDomainRoutes(t *testing.T) {
	h := newHarness(t)
	h.add(link("team-a", "docs", "docs", "https://example.com/a-docs"))
	h.add(link("team-b", "docs", "docs", "https://example.com/b-docs"))
	h.addNS(nsObj("team-a", epoch.Add(-48*time.Hour), "go.a.example.com"))
	h.addNS(nsObj("team-b", epoch.Add(-24*time.Hour), ""))

	okA := want{302, "https://example.com/a-docs", "private, no-cache", "", ""}
	check(t, "domain route", h.do("GET", "go.a.example.com", "/docs"), okA, false)
	check(t, "domain route, port and case ignored", h.do("GET", "Go.A.Example.COM:8080", "/docs"), okA, false)
	check(t, "HEAD on the domain route", h.do("HEAD", "go.a.example.com", "/docs"), okA, true)
	check(t, "namespace route on a domain host", h.do("GET", "go.a.example.com", "/team-b/docs"),
		want{302, "https://example.com/b-docs", "private, no-cache", "", ""}, false)
	check(t, "unknown code on the domain", h.do("GET", "go.a.example.com", "/nope"), want{404, "", "no-store", "", ""}, false)
	check(t, "unknown host", h.do("GET", "go.c.example.com", "/docs"), want{404, "", "no-store", "", ""}, false)
	check(t, "no admin path on the redirect port", h.do("GET", "go.a.example.com", "/healthz"), want{404, "", "no-store", "", ""}, false)

	// A younger namespace claiming the same domain does not take it.
	h.nss.h.OnUpdate(transformed(nsObj("team-b", epoch.Add(-24*time.Hour), "")), transformed(nsObj("team-b", epoch.Add(-24*time.Hour), "GO.A.example.com")))
	check(t, "older namespace keeps the domain", h.do("GET", "go.a.example.com", "/docs"), okA, false)
	// When the older one lets go, the younger one serves it.
	h.nss.h.OnDelete(transformed(nsObj("team-a", epoch.Add(-48*time.Hour), "go.a.example.com")))
	check(t, "younger namespace after the older one left", h.do("GET", "go.a.example.com", "/docs"),
		want{302, "https://example.com/b-docs", "private, no-cache", "", ""}, false)
}

func TestDomainsConflicts(t *testing.T) {
	type ev struct{ host, loser, winner string }
	var got []ev
	d := NewDomains(func(host, loser, winner string) { got = append(got, ev{host, loser, winner}) })
	d.Set("young", epoch, "go.example.com")
	d.Set("old", epoch.Add(-time.Hour), "go.example.com")
	d.Set("old", epoch.Add(-time.Hour), "go.example.com") // no change, no event
	d.Set("young", epoch, "Go.Example.com")               // same claim, no new event
	if ns, _ := d.Lookup("go.example.com"); ns != "old" {
		t.Errorf("served from %q, want old", ns)
	}
	if len(got) != 1 || got[0] != (ev{"go.example.com", "young", "old"}) {
		t.Fatalf("events %v, want one for young", got)
	}
	// Same creation time: the smaller name wins.
	d.Set("a-same", epoch, "tie.example.com")
	d.Set("b-same", epoch, "tie.example.com")
	if ns, _ := d.Lookup("tie.example.com"); ns != "a-same" {
		t.Errorf("tie served from %q, want a-same", ns)
	}
	// The conflict ends and starts again: warned again.
	d.Set("young", epoch, "")
	d.Set("young", epoch, "go.example.com")
	n := 0
	for _, e := range got {
		if e.loser == "young" {
			n++
		}
	}
	if n != 2 {
		t.Errorf("young warned %d times, want 2 (%v)", n, got)
	}
	if d.Len() != 2 {
		t.Errorf("Len %d, want 2", d.Len())
	}
}

func TestNotReady(t *testing.T) {
	h := newHarness(t)
	h.add(link("ns", "a", "a", "https://example.com/a"))
	h.r.ready.Store(false)
	h.links.synced = false
	resp := h.do("GET", "", "/ns/a")
	if resp.StatusCode != 503 || resp.Header.Get("Cache-Control") != "no-store" {
		t.Errorf("before sync: %d %q", resp.StatusCode, resp.Header.Get("Cache-Control"))
	}
	probe := httptest.NewRecorder()
	h.r.ProbeHandler().ServeHTTP(probe, httptest.NewRequest("GET", "/readyz", nil))
	if probe.Code != 503 {
		t.Errorf("readyz before sync: %d", probe.Code)
	}
	h.links.synced = true
	probe = httptest.NewRecorder()
	h.r.ProbeHandler().ServeHTTP(probe, httptest.NewRequest("GET", "/readyz", nil))
	if probe.Code != 200 {
		t.Errorf("readyz after sync: %d", probe.Code)
	}
	// Readiness does not flap back (an unreachable API server later).
	h.links.synced = false
	if resp := h.do("GET", "", "/ns/a"); resp.StatusCode != 302 {
		t.Errorf("after sync: %d", resp.StatusCode)
	}
}

func TestProbesAndMetrics(t *testing.T) {
	reg := prometheus.NewRegistry()
	r := New(Options{Registry: reg, Gatherer: reg})
	links, nss := &fakeInformer{synced: true}, &fakeInformer{synced: true}
	if err := r.WatchShortLinks(links); err != nil {
		t.Fatal(err)
	}
	if err := r.WatchNamespaces(nss); err != nil {
		t.Fatal(err)
	}
	links.h.OnAdd(transformed(link("ns", "a", "a", "https://example.com/a")), true)
	for _, p := range []string{"/ns/a", "/ns/a", "/ns/b"} {
		r.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", p, nil))
	}
	get := func(path string) (int, string) {
		rec := httptest.NewRecorder()
		r.ProbeHandler().ServeHTTP(rec, httptest.NewRequest("GET", path, nil))
		return rec.Code, rec.Body.String()
	}
	if code, _ := get("/healthz"); code != 200 {
		t.Errorf("healthz %d", code)
	}
	if code, _ := get("/readyz"); code != 200 {
		t.Errorf("readyz %d", code)
	}
	code, body := get("/metrics")
	for _, s := range []string{
		`linkforge_redirector_requests_total{code="3xx"} 2`,
		`linkforge_redirector_requests_total{code="4xx"} 1`,
		`linkforge_redirector_index_links 1`,
		`linkforge_redirector_index_tombstones 0`,
	} {
		if !strings.Contains(body, s) {
			t.Errorf("metrics (%d) lack %q", code, s)
		}
	}
	if code, _ := get("/ns/a"); code != 404 {
		t.Errorf("probe port serves links: %d", code)
	}
	r.Drain()
	if code, _ := get("/readyz"); code != 503 {
		t.Errorf("readyz while draining %d", code)
	}
	rec := httptest.NewRecorder()
	r.ServeHTTP(rec, httptest.NewRequest("GET", "/ns/a", nil))
	if rec.Code != 302 {
		t.Errorf("redirects stop while draining: %d", rec.Code)
	}
}

func TestAccessLog(t *testing.T) {
	h := newHarness(t)
	h.add(link("ns", "a", "a", "https://example.com/a"))
	h.do("GET", "go.example.com", "/ns/a?x=1")
	h.r.Close() // writes out the queued records
	var rec accessRecord
	if err := json.Unmarshal(h.log.Bytes(), &rec); err != nil {
		t.Fatalf("access log %q: %v", h.log.Bytes(), err)
	}
	if rec.Status != 302 || rec.Location != "https://example.com/a" || rec.URI != "/ns/a?x=1" || rec.Host != "go.example.com" ||
		rec.Method != "GET" || rec.UserAgent != "Go-http-client/1.1" || rec.Remote == "" {
		t.Errorf("access record %+v", rec)
	}
	off := New(Options{})
	if off.accessLog != nil {
		t.Error("access log on by default")
	}
}

func TestTransform(t *testing.T) {
	in := link("ns", "a", "abc", " https://example.com/a b ", func(l *linkv1.ShortLink) {
		l.Spec.MaxUses = ptr.To[int64](5)
		l.Spec.RedirectStatus = 307
		l.Spec.ForwardQuery = true
		l.Status.Uses = 2
	})
	out, err := Transform(in)
	if err != nil {
		t.Fatal(err)
	}
	l, ok := out.(*Link)
	if !ok {
		t.Fatalf("Transform gave %T", out)
	}
	if l.Namespace != "ns" || l.Name != "a" || l.Code != "abc" || l.ResourceVersion != "1" ||
		l.Location != "https://example.com/a%20b" || l.Status() != 307 || !l.Confirmed() ||
		!l.is(flagMaxUses) || !l.is(flagForwardQuery) || l.is(flagFinished) || l.is(flagExpires) ||
		!l.Created().Equal(epoch.Add(-time.Hour)) {
		t.Errorf("link %+v", l)
	}
	if in.ManagedFields == nil || in.Labels == nil || in.Spec.URL != " https://example.com/a b " {
		t.Error("Transform changed its input")
	}
	again, _ := Transform(out)
	if again != out {
		t.Error("Transform is not idempotent on its output")
	}
	m := l.GetObjectMeta()
	if m.GetNamespace() != "ns" || m.GetName() != "a" || m.GetResourceVersion() != "1" || len(m.GetAnnotations()) != 0 {
		t.Errorf("object meta %+v", m)
	}
	if key, err := toolscache.MetaNamespaceKeyFunc(l); err != nil || key != "ns/a" {
		t.Errorf("key %q %v", key, err)
	}

	nsOut, _ := Transform(nsObj("team", epoch, "go.example.com"))
	ns := nsOut.(*corev1.Namespace)
	if len(ns.Labels) != 0 || len(ns.Annotations) != 1 || ns.Annotations[DomainAnnotation] != "go.example.com" || !ns.CreationTimestamp.Time.Equal(epoch) {
		t.Errorf("namespace %+v", ns.ObjectMeta)
	}
	plain, _ := Transform(nsObj("plain", epoch, ""))
	if plain.(*corev1.Namespace).Annotations != nil {
		t.Error("annotations kept on a namespace without a domain")
	}
}

// What counting reads of a link: a first reservation writes on this
// version only if it shows no reservation; a link with an idleTimeout
// reports its uses every round.
func TestUsesVersion(t *testing.T) {
	in := link("ns", "a", "abc", "https://example.com/a", func(l *linkv1.ShortLink) {
		l.Spec.MaxUses = ptr.To[int64](5)
		l.Status.Uses = 2
	})
	if v := NewLink(in).UsesVersion(); !v.NoReservations || v.IdleTimeout || v.MaxUses != 5 || v.StatusUses != 2 || v.ResourceVersion != "1" || v.Name != "a" {
		t.Errorf("uses version %+v", v)
	}
	in.Status.UseReservations = []linkv1.UseReservation{{Holder: "r", Quota: 1}}
	in.Spec.IdleTimeout = &metav1.Duration{Duration: time.Hour}
	if v := NewLink(in).UsesVersion(); v.NoReservations || !v.IdleTimeout {
		t.Errorf("a link with a reservation and an idleTimeout: %+v", v)
	}
}

// What a link costs the redirector, by structure: a Link per version
// (every link), a linkMore for the few with a limit, an activation, a
// card or previewer fetches, a routedMore (with the compiled routing) for
// those with routing, a linkCard for those with a card, and the
// uses.Counter shared by the versions (TestCounterSize there). Each size
// is pinned, so that a new field is a decision, and the allocation size
// class it falls in is named: past it, every such link pays 16 bytes or
// more (160 KB at 10,000 links). The totals are in docs/performance.md
// ("Memory per link").
func TestPerLinkSizes(t *testing.T) {
	for _, tc := range []struct {
		name              string
		size, want, class uintptr
	}{
		// Link was 112 bytes until activates, 144 with lastUsed and peer,
		// 160 with the uid of click events; 144 again since activates
		// moved to linkMore and the uid's hash is computed where read.
		{"Link", unsafe.Sizeof(Link{}), 144, 144},
		// linkMore is 80 bytes with the gate's access (72 before).
		{"linkMore", unsafe.Sizeof(linkMore{}), 80, 80},
		// The 320-byte class starts every object on a cache line (see
		// routedMore).
		{"routedMore", unsafe.Sizeof(routedMore{}), 320, 320},
		{"rules.Compiled", unsafe.Sizeof(rules.Compiled{}), 216, 0}, // in routedMore
		{"linkCard", unsafe.Sizeof(linkCard{}), 56, 64},
	} {
		if tc.size != tc.want {
			t.Errorf("%s is %d bytes, not %d (the %d-byte size class): a field every link pays for is a decision; "+
				"update this test and the per-link table in docs/performance.md", tc.name, tc.size, tc.want, tc.class)
		}
	}
}

func TestLookupDoesNotAllocate(t *testing.T) {
	h := newHarness(t)
	h.add(link("ns", "a", "abc", "https://example.com/a"))
	ns, code := strings.Clone("ns"), strings.Clone("abc")
	if n := testing.AllocsPerRun(1000, func() {
		if h.r.Index().Lookup(ns, code) == nil {
			t.Fatal("not found")
		}
	}); n != 0 {
		t.Errorf("Lookup allocates %v times", n)
	}
}

// Two keys with one 64-bit hash (forced here; never seen in practice) both
// stay reachable, whatever the order of adds and removals.
func TestIndexHashCollision(t *testing.T) {
	x := NewIndex(time.Hour)
	s := &x.shards[0]
	const h = 42
	a := NewLink(link("ns", "a", "codeA", "https://example.com/a"))
	b := NewLink(link("ns", "b", "codeB", "https://example.com/b"))
	ka, kb := key{"ns", "codeA"}, key{"ns", "codeB"}
	x.setLocked(s, h, ka, a, "", nil)
	x.setLocked(s, h, kb, b, "", nil)
	if s.get(h, ka) != a || s.get(h, kb) != b {
		t.Fatal("colliding keys not both reachable")
	}
	x.setLocked(s, h, ka, nil, "a", nil)
	if s.get(h, ka) != nil || s.get(h, kb) != b {
		t.Fatal("removing the first key lost the second")
	}
	a2 := NewLink(link("ns", "a", "codeA", "https://example.com/a2"))
	x.setLocked(s, h, ka, a2, "", nil)
	b2 := NewLink(link("ns", "b", "codeB", "https://example.com/b2"))
	x.setLocked(s, h, kb, b2, "", nil)
	if s.get(h, ka) != a2 || s.get(h, kb) != b2 {
		t.Fatal("updates of colliding keys")
	}
	x.setLocked(s, h, kb, nil, "b", nil)
	x.setLocked(s, h, ka, nil, "a", nil)
	if len(s.m) != 0 || len(s.other) != 0 || x.Links() != 0 {
		t.Fatalf("left over: %d %d links %d", len(s.m), len(s.other), x.Links())
	}
}

// TestReadyWaitsForEveryInformer: with one ShortLink informer per namespace
// served, readiness waits for all of them and for the Namespace informer,
// however many have registered (two ShortLink informers are not a ShortLink
// and a Namespace informer).
func TestReadyWaitsForEveryInformer(t *testing.T) {
	r := New(Options{})
	r.waitForLinkInformers(2)
	a, b, nss := &fakeInformer{synced: true}, &fakeInformer{synced: true}, &fakeInformer{synced: true}
	if err := r.WatchShortLinks(a); err != nil {
		t.Fatal(err)
	}
	if err := r.WatchShortLinks(b); err != nil {
		t.Fatal(err)
	}
	if r.Ready() {
		t.Fatal("ready without a Namespace informer")
	}
	b.synced = false
	if err := r.WatchNamespaces(nss); err != nil {
		t.Fatal(err)
	}
	if r.Ready() {
		t.Fatal("ready before the second ShortLink informer synced")
	}
	b.synced = true
	if !r.Ready() {
		t.Fatal("not ready with every informer synced")
	}
}
