package redirect

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-json-experiment/json/jsontext"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

// clientGoDecoder decodes as client-go's informers do.
var clientGoDecoder = func() runtime.Decoder {
	scheme := runtime.NewScheme()
	if err := linkv1.AddToScheme(scheme); err != nil {
		panic(err)
	}
	return serializer.NewCodecFactory(scheme).UniversalDeserializer()
}()

func clientGoDecode(data []byte) (*linkv1.ShortLink, error) {
	obj, _, err := clientGoDecoder.Decode(data, nil, &linkv1.ShortLink{})
	if err != nil {
		return nil, err
	}
	return obj.(*linkv1.ShortLink), nil
}

// wireLinks are ShortLinks as the API server sends them: managedFields, a
// kubectl last-applied annotation, labels, owners, finalizers, conditions
// and reservations (all of which the lean decoder skips) around every field
// NewLink reads.
func wireLinks() []*linkv1.ShortLink {
	created := metav1.NewTime(time.Date(2026, 11, 24, 10, 0, 0, 0, time.UTC))
	at := metav1.NewTime(created.Add(48 * time.Hour))
	base := func(name string) *linkv1.ShortLink {
		return &linkv1.ShortLink{
			TypeMeta: metav1.TypeMeta{APIVersion: linkv1.GroupVersion.String(), Kind: "ShortLink"},
			ObjectMeta: metav1.ObjectMeta{
				Namespace: "team-a", Name: name, UID: types.UID("uid-" + name), ResourceVersion: "4711",
				Generation: 2, CreationTimestamp: created,
				Labels: map[string]string{"app": "docs"},
				Annotations: map[string]string{
					"kubectl.kubernetes.io/last-applied-configuration": `{"apiVersion":"linkforge.io/v1alpha1","kind":"ShortLink","spec":{"url":"https://example.com/"}}` + "\n",
				},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: "owner", UID: "o1"}},
				Finalizers:      []string{"example.com/keep"},
				ManagedFields: []metav1.ManagedFieldsEntry{{
					Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "linkforge.io/v1alpha1",
					Time: &created, FieldsType: "FieldsV1",
					FieldsV1: metav1.NewFieldsV1(`{"f:spec":{".":{},"f:url":{}},"f:metadata":{"f:labels":{"f:app":{}}}}`),
				}},
			},
			Spec: linkv1.ShortLinkSpec{URL: "https://example.com/docs?a=1#top"},
			Status: linkv1.ShortLinkStatus{
				ObservedGeneration: 2, ConfirmedGeneration: 2, Code: "abcDEF1234", State: "Active",
				CanonicalURL: "https://example.com/docs?a=1#top", ShortURL: "https://go.example.com/team-a/abcDEF1234",
				Conditions: []metav1.Condition{{Type: linkv1.ConditionReady, Status: metav1.ConditionTrue, Reason: linkv1.ReasonCodeAssigned,
					Message: "code abcDEF1234 redirects to \"https://example.com/docs?a=1#top\"", LastTransitionTime: created, ObservedGeneration: 2}},
			},
		}
	}
	var links []*linkv1.ShortLink
	add := func(name string, mutate func(l *linkv1.ShortLink)) {
		l := base(name)
		mutate(l)
		links = append(links, l)
	}
	add("served", func(*linkv1.ShortLink) {})
	add("routed", func(l *linkv1.ShortLink) {
		appLink(l)
		l.Spec.ExpiredURL, l.Spec.ForwardPath = "https://example.com/over", true
		l.Status.VariantUses = []linkv1.VariantUses{{URL: "https://example.com/b", Uses: 3}, {URL: l.Spec.URL, Uses: 8}}
	})
	add("pending", func(l *linkv1.ShortLink) { l.Status = linkv1.ShortLinkStatus{} })
	add("spec-ahead", func(l *linkv1.ShortLink) { l.Generation = 3 })
	add("expires-at", func(l *linkv1.ShortLink) { l.Spec.ExpiresAt = &at })
	add("ttl", func(l *linkv1.ShortLink) { l.Spec.TTL = &metav1.Duration{Duration: 90 * time.Minute} })
	add("finished", func(l *linkv1.ShortLink) { l.Status.FinishedAt = &at })
	add("max-uses", func(l *linkv1.ShortLink) {
		l.Spec.MaxUses = ptr.To[int64](10)
		l.Status.Uses = 7
		l.Status.UseReservations = []linkv1.UseReservation{{Holder: "redirector-0-1f2e", Quota: 3, ExpiresAt: metav1.NewMicroTime(at.Time)}}
	})
	add("peers", func(l *linkv1.ShortLink) {
		l.Spec.MaxUses = ptr.To[int64](10)
		l.Status.UseReservations = []linkv1.UseReservation{
			{Holder: "redirector-0-1f2e", Quota: 2, ExpiresAt: metav1.NewMicroTime(at.Time), PeerAddress: "10.0.0.1:8082"},
			{Holder: "redirector-1-9a0b", Quota: 3, ExpiresAt: metav1.NewMicroTime(at.Time)},
			{Holder: "redirector-2-77c1", Quota: 5, ExpiresAt: metav1.NewMicroTime(at.Time), PeerAddress: "10.0.0.3:8082", PeerProtocol: linkv1.PeerProtocolHMACv1},
			{Holder: "redirector-3-0d0d", Quota: 5, ExpiresAt: metav1.NewMicroTime(at.Time), PeerAddress: "10.0.0.4:8082"},
			{Holder: "redirector-4-v030", Quota: 9, ExpiresAt: metav1.NewMicroTime(at.Time), Peer: "10.0.0.5:8082"}, // v0.3.0's
		}
	})
	add("returns-requested", func(l *linkv1.ShortLink) {
		l.Spec.MaxUses = ptr.To[int64](10)
		l.Status.UseReservations = []linkv1.UseReservation{
			{Holder: "redirector-0-1f2e", Quota: 6, ExpiresAt: metav1.NewMicroTime(at.Time), PeerAddress: "10.0.0.1:8082", ReturnRequested: true},
			{Holder: "redirector-2-77c1", Quota: 2, ExpiresAt: metav1.NewMicroTime(at.Time), PeerAddress: "10.0.0.3:8082", PeerProtocol: linkv1.PeerProtocolHMACv1},
		}
	})
	add("only-marked", func(l *linkv1.ShortLink) {
		l.Spec.MaxUses = ptr.To[int64](10)
		l.Status.UseReservations = []linkv1.UseReservation{
			{Holder: "redirector-0-1f2e", Quota: 6, ExpiresAt: metav1.NewMicroTime(at.Time), PeerAddress: "10.0.0.1:8082", ReturnRequested: true},
		}
	})
	add("no-reservations", func(l *linkv1.ShortLink) {
		l.Spec.MaxUses = ptr.To[int64](10)
		l.Status.UseReservations = []linkv1.UseReservation{}
	})
	add("exhausted", func(l *linkv1.ShortLink) { l.Spec.MaxUses, l.Status.Uses = ptr.To[int64](5), 5 })
	add("forward-query", func(l *linkv1.ShortLink) { l.Spec.ForwardQuery = true })
	add("permanent", func(l *linkv1.ShortLink) { l.Spec.RedirectStatus = 308 })
	add("scheduled", func(l *linkv1.ShortLink) {
		l.Spec.ActivatesAt = &at
		l.Spec.DedupPolicy = linkv1.DedupNever
	})
	add("escapes", func(l *linkv1.ShortLink) {
		l.Spec.URL = "https://example.com/caf\u00e9/\u65e5\u672c?q=a&b=<c>"
		l.Annotations["note"] = "tab\tquote\" \u2028 emoji \U0001F600"
	})
	add("bare", func(l *linkv1.ShortLink) {
		l.Labels, l.Annotations, l.OwnerReferences, l.Finalizers, l.ManagedFields = nil, nil, nil, nil, nil
		l.Status.Conditions = nil
	})
	return links
}

func sameLink(t *testing.T, what string, got, want *Link) {
	t.Helper()
	g, w := *got, *want
	if !reflect.DeepEqual(g.more, w.more) {
		t.Errorf("%s: more:\n got  %+v\n want %+v", what, g.more, w.more)
	}
	g.more, w.more = nil, nil
	if g != w {
		t.Errorf("%s:\n got  %+v\n want %+v", what, g, w)
	}
}

// TestLeanDecodeMakesTheSameLinks: a list and a watch stream decoded by the
// lean decoder give every ShortLink the Link client-go's decoding gives it.
func TestLeanDecodeMakesTheSameLinks(t *testing.T) {
	links := wireLinks()
	list := &linkv1.ShortLinkList{TypeMeta: metav1.TypeMeta{APIVersion: linkv1.GroupVersion.String(), Kind: "ShortLinkList"},
		ListMeta: metav1.ListMeta{ResourceVersion: "9000"}}
	var stream bytes.Buffer
	want := make([]*Link, len(links))
	for i, l := range links {
		data, err := json.Marshal(l)
		if err != nil {
			t.Fatal(err)
		}
		decoded, err := clientGoDecode(data)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = NewLink(decoded)
		list.Items = append(list.Items, *l)
		fmt.Fprintf(&stream, "{\"type\":\"MODIFIED\",\"object\":%s}\n", data)
	}

	data, err := json.Marshal(list)
	if err != nil {
		t.Fatal(err)
	}
	got, err := decodeLinkList(jsontext.NewDecoder(bytes.NewReader(data), decodeOptions))
	if err != nil {
		t.Fatal(err)
	}
	if got.ResourceVersion != "9000" || len(got.Items) != len(links) {
		t.Fatalf("list: resourceVersion %q, %d items; want 9000, %d", got.ResourceVersion, len(got.Items), len(links))
	}
	for i := range links {
		sameLink(t, "list item "+links[i].Name, got.Items[i], want[i])
	}

	events := newLinkEvents(io.NopCloser(&stream))
	for i := range links {
		typ, obj, err := events.Decode()
		if err != nil {
			t.Fatalf("event %d: %v", i, err)
		}
		sl, ok := obj.(*linkv1.ShortLink)
		if typ != watch.Modified || !ok {
			t.Fatalf("event %d: %s %T", i, typ, obj)
		}
		if sl.ManagedFields != nil || sl.Annotations != nil || sl.Status.Conditions != nil {
			t.Errorf("event %d: the lean decoder kept what it should skip: %+v", i, sl.ObjectMeta)
		}
		sameLink(t, "watch event "+links[i].Name, NewLink(sl), want[i])
	}
	if _, _, err := events.Decode(); err != io.EOF {
		t.Fatalf("after the last event: %v, want io.EOF", err)
	}
}

func TestLinkEvents(t *testing.T) {
	const link = `{"metadata":{"name":"a","namespace":"n","resourceVersion":"5"},"spec":{"url":"https://e.com/"},"status":{"code":"c","confirmedGeneration":1}}`
	for _, tc := range []struct {
		name, stream string
		want         watch.EventType
		check        func(runtime.Object) error
		err          string // a substring of the error, if one is expected
		eof          error  // the error of the next Decode
	}{
		{name: "added", stream: `{"type":"ADDED","object":` + link + `}`, want: watch.Added, eof: io.EOF,
			check: func(o runtime.Object) error {
				if l := o.(*linkv1.ShortLink); l.Name != "a" || l.Status.Code != "c" || l.ResourceVersion != "5" {
					return fmt.Errorf("decoded %+v", l)
				}
				return nil
			}},
		{name: "deleted", stream: `{"type":"DELETED","object":` + link + "}\n", want: watch.Deleted, eof: io.EOF},
		{name: "object before type, unknown members", stream: `{"x":[1,{"y":null}],"object":` + link + `,"type":"MODIFIED","z":"w"}`, want: watch.Modified, eof: io.EOF,
			check: func(o runtime.Object) error {
				if o.(*linkv1.ShortLink).Name != "a" {
					return fmt.Errorf("decoded %+v", o)
				}
				return nil
			}},
		{name: "bookmark keeps its annotations", want: watch.Bookmark, eof: io.EOF,
			stream: `{"type":"BOOKMARK","object":{"kind":"ShortLink","metadata":{"resourceVersion":"77","creationTimestamp":null,"annotations":{"k8s.io/initial-events-end":"true"}}}}`,
			check: func(o runtime.Object) error {
				if l := o.(*linkv1.ShortLink); l.ResourceVersion != "77" || l.Annotations[metav1.InitialEventsAnnotationKey] != "true" {
					return fmt.Errorf("decoded %+v", l.ObjectMeta)
				}
				return nil
			}},
		{name: "error", want: watch.Error, eof: io.EOF,
			stream: `{"type":"ERROR","object":{"kind":"Status","apiVersion":"v1","status":"Failure","message":"too old resource version: 1 (5)","reason":"Expired","code":410}}`,
			check: func(o runtime.Object) error {
				if s := o.(*metav1.Status); s.Code != 410 || s.Reason != metav1.StatusReasonExpired {
					return fmt.Errorf("decoded %+v", s)
				}
				return nil
			}},
		{name: "two events", stream: `{"type":"ADDED","object":` + link + `} {"type":"ADDED","object":` + link + `}`, want: watch.Added},
		{name: "cut inside an event", stream: `{"type":"ADDED","object":{"metadata":{"name":"a"`, err: io.ErrUnexpectedEOF.Error()},
		{name: "cut inside the first event", stream: `{"type":"ADD`, err: io.ErrUnexpectedEOF.Error()},
		{name: "unknown type", stream: `{"type":"RENAMED","object":` + link + `}`, err: `unknown type "RENAMED"`},
		{name: "no object", stream: `{"type":"ADDED"}`, err: "without an object"},
		{name: "not an object", stream: `["ADDED"]`, err: "want a JSON object"},
		{name: "type not a string", stream: `{"type":1,"object":{}}`, err: "not a string"},
		{name: "wrong field type", stream: `{"type":"ADDED","object":{"spec":{"url":5}}}`, err: "ADDED"},
		{name: "not JSON", stream: `{"type":"ADDED","object":{nope}}`, err: "invalid character"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			d := newLinkEvents(io.NopCloser(strings.NewReader(tc.stream)))
			typ, obj, err := d.Decode()
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("Decode: %s %v, error %v; want an error with %q", typ, obj, err, tc.err)
				}
				return
			}
			if err != nil || typ != tc.want {
				t.Fatalf("Decode: %s, error %v; want %s", typ, err, tc.want)
			}
			if tc.check != nil {
				if err := tc.check(obj); err != nil {
					t.Fatal(err)
				}
			}
			if tc.eof != nil {
				if _, _, err := d.Decode(); err != tc.eof {
					t.Fatalf("next Decode: %v, want %v", err, tc.eof)
				}
			}
		})
	}
}

func TestDecodeLinkList(t *testing.T) {
	for _, tc := range []struct {
		name, body string
		items      int
		rv, err    string
	}{
		{name: "empty", body: `{"kind":"ShortLinkList","metadata":{"resourceVersion":"12"},"items":[]}`, rv: "12"},
		{name: "null items, metadata last", body: `{"items":null,"metadata":{"resourceVersion":"13","continue":""}}`, rv: "13"},
		{name: "items", rv: "14", items: 2,
			body: `{"apiVersion":"linkforge.io/v1alpha1","items":[{"metadata":{"name":"a","managedFields":[{"manager":"m"}]}},{"metadata":{"name":"b"}}],"kind":"ShortLinkList","metadata":{"resourceVersion":"14"}}`},
		{name: "cut", body: `{"metadata":{"resourceVersion":"14"},"items":[{"metadata":{"name":"a"}},`, err: "unexpected EOF"},
		{name: "bad item", body: `{"items":[{"metadata":{"name":"a"}},{"spec":{"maxUses":"x"}}]}`, err: "item 1"},
		{name: "items not an array", body: `{"items":{}}`, err: "want ["},
		{name: "not an object", body: `[]`, err: "want {"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			list, err := decodeLinkList(jsontext.NewDecoder(strings.NewReader(tc.body), decodeOptions))
			if tc.err != "" {
				if err == nil || !strings.Contains(err.Error(), tc.err) {
					t.Fatalf("error %v; want one with %q", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if list.ResourceVersion != tc.rv || len(list.Items) != tc.items {
				t.Fatalf("resourceVersion %q, %d items; want %q, %d", list.ResourceVersion, len(list.Items), tc.rv, tc.items)
			}
		})
	}
}

// FuzzLeanDecode: on any input, the lean decoder does not panic, and where
// client-go's decoding reads a ShortLink, the lean decoder reads it too and
// makes the same Link of it.
func FuzzLeanDecode(f *testing.F) {
	for _, l := range wireLinks() {
		data, err := json.Marshal(l)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte(`{"metadata":{"name":"a","name":"b"},"spec":{"url":"https://e.com/\xff"}}`))
	f.Add([]byte(`{"metadata":{"labels":null,"managedFields":[{"fieldsV1":{"f:a":{}}}]},"status":{"uses":null}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		lean, leanErr := decodeEventObject(watch.Added, jsontext.NewDecoder(bytes.NewReader(data), decodeOptions))
		if !json.Valid(data) {
			return // client-go reads some of these (an empty input, YAML)
		}
		want, err := clientGoDecode(data)
		if err != nil {
			return
		}
		if leanErr != nil {
			t.Fatalf("client-go decodes %q, the lean decoder fails: %v", data, leanErr)
		}
		sameLink(t, string(data), NewLink(lean.(*linkv1.ShortLink)), NewLink(want))
	})
}

// TestOpenStreamRetries: a list or watch whose connection closes before the
// response is sent again (as client-go's Request.Watch does); an error the
// API server answers is returned at once.
func TestOpenStreamRetries(t *testing.T) {
	var calls atomic.Int32
	const failures = 2
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		n := calls.Add(1)
		switch {
		case req.URL.Query().Get("watch") != "true":
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusForbidden)
			_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Forbidden","code":403,"message":"shortlinks is forbidden"}`)
		case n <= failures:
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				_ = conn.Close() // the client reads EOF
			}
		default:
			w.Header().Set("Content-Type", "application/json")
			_, _ = io.WriteString(w, `{"type":"ADDED","object":{"metadata":{"name":"a","namespace":"n"}}}`+"\n")
		}
	}))
	defer srv.Close()
	c, err := linkRESTClient(&rest.Config{Host: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	lw := newLinkListWatch(c, "n")

	w, err := lw.watch(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatalf("watch after %d closed connections: %v", failures, err)
	}
	defer w.Stop()
	select {
	case ev := <-w.ResultChan():
		if l, ok := ev.Object.(*linkv1.ShortLink); ev.Type != watch.Added || !ok || l.Name != "a" {
			t.Fatalf("event %s %#v", ev.Type, ev.Object)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no event")
	}
	if n := calls.Load(); n != failures+1 {
		t.Fatalf("%d watch requests, want %d", n, failures+1)
	}

	calls.Store(0)
	if _, err := lw.list(t.Context(), metav1.ListOptions{}); !apierrors.IsForbidden(err) {
		t.Fatalf("list: %v, want Forbidden", err)
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d list requests for a Forbidden, want 1", n)
	}
}

// TestLinkInformerPagedList: an informer over a list the API server sends in
// pages (as on a relist) holds every page's links, as Links.
func TestLinkInformerPagedList(t *testing.T) {
	item := func(name string) string {
		return `{"metadata":{"name":"` + name + `","namespace":"n","resourceVersion":"9","generation":1},"spec":{"url":"https://example.com/` + name + `"},` +
			`"status":{"code":"` + name + `","confirmedGeneration":1}}`
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		q := req.URL.Query()
		switch {
		case q.Get("watch") == "true":
			w.(http.Flusher).Flush()
			<-req.Context().Done()
		case q.Get("continue") == "":
			_, _ = io.WriteString(w, `{"kind":"ShortLinkList","metadata":{"resourceVersion":"10","continue":"page2"},"items":[`+item("a")+`]}`)
		default:
			_, _ = io.WriteString(w, `{"kind":"ShortLinkList","metadata":{"resourceVersion":"10"},"items":[`+item("b")+`,`+item("c")+`]}`)
		}
	}))
	defer srv.Close()
	c, err := linkRESTClient(&rest.Config{Host: srv.URL}, nil)
	if err != nil {
		t.Fatal(err)
	}
	inf, err := newLinkInformer(c, "n")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	go inf.RunWithContext(ctx)
	if !toolscache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("not synced")
	}
	objs := inf.GetStore().List()
	got := make([]string, 0, len(objs))
	for _, obj := range objs {
		l, ok := obj.(*Link)
		if !ok {
			t.Fatalf("the store holds a %T", obj)
		}
		got = append(got, l.Name+"="+l.Location)
	}
	slices.Sort(got)
	want := []string{"a=https://example.com/a", "b=https://example.com/b", "c=https://example.com/c"}
	if !slices.Equal(got, want) {
		t.Fatalf("store %v, want %v", got, want)
	}
}
