package main

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	toolscache "k8s.io/client-go/tools/cache"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/benchlinks"
	"github.com/linkforge/linkforge/internal/redirect"
)

// Synthetic links are for benchmarks (hack/bench-redirect.sh): they fill the
// index without an API server, through the same path as the real informer.
// Each link is built the way an API server returns it (uid, generation,
// labels, a kubectl last-applied annotation, two managedFields entries,
// status with canonicalURL, shortURL, expiresAt-free Ready condition with
// message), then streamed through a client-go SharedIndexInformer (watch-list
// mode) with TransformShortLink and the redirector's event handlers, and no
// indexers, as the redirector's own ShortLink informers. So the memory held
// per link is the informer's stripped object and store entry plus the index
// entry, as in production. (Production decodes JSON and syncs by one LIST;
// neither changes what is held once synced.)

// SyntheticNamespace is the name of the i-th synthetic namespace.
func SyntheticNamespace(i int) string { return fmt.Sprintf("bench-%03d", i) }

// SyntheticCode is the code of the i-th synthetic link: 10 base62 digits of
// a mix of i, like a hashed code.
func SyntheticCode(i int) string {
	const digits = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"
	x := uint64(i) + 0x9e3779b97f4a7c15
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9
	x = (x ^ (x >> 27)) * 0x94d049bb133111eb
	x ^= x >> 31
	var b [10]byte
	for j := range b {
		b[j] = digits[x%62]
		x /= 62
	}
	return string(b[:])
}

// SyntheticURL is the target of the i-th synthetic link (about 80 bytes).
func SyntheticURL(i int) string {
	return "https://www.example.com/articles/2026/" + strconv.Itoa(i) + "/a-typical-article-slug?utm_source=linkforge"
}

// syntheticLink builds the i-th of n links over nss namespaces as an API
// server would return it.
func syntheticLink(i, nss int, created time.Time, kind string) *linkv1.ShortLink {
	l := plainSyntheticLink(i, nss, created)
	if kind == kindRules {
		benchlinks.WithRules(&l.Spec, i)
	}
	return l
}

func plainSyntheticLink(i, nss int, created time.Time) *linkv1.ShortLink {
	ns := SyntheticNamespace(i % nss)
	name := "link-" + strconv.Itoa(i)
	code := SyntheticCode(i)
	url := SyntheticURL(i)
	applied := `{"apiVersion":"linkforge.io/v1alpha1","kind":"ShortLink","metadata":{"annotations":{},"labels":{"app.kubernetes.io/part-of":"bench"},"name":"` +
		name + `","namespace":"` + ns + `"},"spec":{"url":"` + url + `"}}` + "\n"
	ts := metav1.NewTime(created)
	return &linkv1.ShortLink{
		TypeMeta: metav1.TypeMeta{APIVersion: linkv1.GroupVersion.String(), Kind: "ShortLink"},
		ObjectMeta: metav1.ObjectMeta{
			Name:              name,
			Namespace:         ns,
			UID:               types.UID(fmt.Sprintf("%08x-0000-4000-8000-%012x", i, i)),
			ResourceVersion:   strconv.Itoa(1000 + i),
			Generation:        1,
			CreationTimestamp: ts,
			Labels:            map[string]string{"app.kubernetes.io/part-of": "bench"},
			Annotations:       map[string]string{"kubectl.kubernetes.io/last-applied-configuration": applied},
			ManagedFields: []metav1.ManagedFieldsEntry{{
				Manager: "kubectl-client-side-apply", Operation: metav1.ManagedFieldsOperationUpdate,
				APIVersion: "linkforge.io/v1alpha1", Time: &ts, FieldsType: "FieldsV1",
				FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/last-applied-configuration":{}},"f:labels":{".":{},"f:app.kubernetes.io/part-of":{}}},"f:spec":{".":{},"f:redirectStatus":{},"f:url":{}}}`),
			}, {
				Manager: "linkforge-manager", Operation: metav1.ManagedFieldsOperationUpdate,
				APIVersion: "linkforge.io/v1alpha1", Time: &ts, FieldsType: "FieldsV1", Subresource: "status",
				FieldsV1: metav1.NewFieldsV1(`{"f:status":{".":{},"f:canonicalURL":{},"f:code":{},"f:conditions":{".":{},"k:{\"type\":\"Ready\"}":{".":{},"f:lastTransitionTime":{},"f:message":{},"f:observedGeneration":{},"f:reason":{},"f:status":{},"f:type":{}}},"f:observedGeneration":{},"f:shortURL":{}}}`),
			}},
		},
		Spec: linkv1.ShortLinkSpec{URL: url, RedirectStatus: 302},
		Status: linkv1.ShortLinkStatus{
			ObservedGeneration:  1,
			ConfirmedGeneration: 1,
			Code:                code,
			CanonicalURL:        url,
			ShortURL:            "http://go.example.com/" + ns + "/" + code,
			Conditions: []metav1.Condition{{
				Type: linkv1.ConditionReady, Status: metav1.ConditionTrue, ObservedGeneration: 1,
				LastTransitionTime: ts, Reason: linkv1.ReasonCodeAssigned, Message: "code " + code + " assigned",
			}},
		},
	}
}

// writeSyntheticTable writes "namespace code url" for each of n synthetic
// links of a kind over nss namespaces, one a line; the url of a link with
// rules is where a browser's request goes (browserTarget).
func writeSyntheticTable(w io.Writer, n, nss int, kind string) error {
	bw := bufio.NewWriter(w)
	created := time.Now().Add(-time.Hour)
	for i := range n {
		url := SyntheticURL(i)
		if kind == kindRules {
			var err error
			if url, err = browserTarget(syntheticLink(i, nss, created, kind)); err != nil {
				return err
			}
		}
		if _, err := fmt.Fprintf(bw, "%s %s %s\n", SyntheticNamespace(i%nss), SyntheticCode(i), url); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// streamLW is a ListerWatcher over generated objects. A watch with
// SendInitialEvents streams them one by one, then the initial-events-end
// bookmark, then stays open; a list returns them all; a plain watch stays
// open with nothing to say.
type streamLW struct {
	n       int
	gen     func(i int) runtime.Object
	newList func(items []runtime.Object) runtime.Object
	empty   func() metav1.Object
}

func (s *streamLW) ListWithContext(_ context.Context, _ metav1.ListOptions) (runtime.Object, error) {
	items := make([]runtime.Object, s.n)
	for i := range items {
		items[i] = s.gen(i)
	}
	return s.newList(items), nil
}

func (s *streamLW) WatchWithContext(_ context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	w := &streamWatch{ch: make(chan watch.Event, 64), done: make(chan struct{})}
	if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
		go func() {
			for i := range s.n {
				select {
				case w.ch <- watch.Event{Type: watch.Added, Object: s.gen(i)}:
				case <-w.done:
					return
				}
			}
			bm := s.empty()
			bm.SetResourceVersion("1")
			bm.SetAnnotations(map[string]string{metav1.InitialEventsAnnotationKey: "true"})
			select {
			case w.ch <- watch.Event{Type: watch.Bookmark, Object: bm.(runtime.Object)}:
			case <-w.done:
			}
		}()
	}
	return w, nil
}

func (s *streamLW) listWatch() *toolscache.ListWatch {
	return &toolscache.ListWatch{ListWithContextFunc: s.ListWithContext, WatchFuncWithContext: s.WatchWithContext}
}

type streamWatch struct {
	ch   chan watch.Event
	done chan struct{}
	once sync.Once
}

func (w *streamWatch) Stop()                          { w.once.Do(func() { close(w.done) }) }
func (w *streamWatch) ResultChan() <-chan watch.Event { return w.ch }

// RunSynthetic feeds the redirector n synthetic links over nss namespaces
// (and those namespaces) through client-go informers, until ctx ends.
func runSynthetic(ctx context.Context, r *redirect.Redirector, n, nss int, kind string) error {
	if nss < 1 {
		nss = 1
	}
	created := time.Now().Add(-time.Hour).Truncate(time.Second)
	links := toolscache.NewSharedIndexInformer((&streamLW{
		n:   n,
		gen: func(i int) runtime.Object { return syntheticLink(i, nss, created, kind) },
		newList: func(items []runtime.Object) runtime.Object {
			l := &linkv1.ShortLinkList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}
			for _, o := range items {
				l.Items = append(l.Items, *o.(*linkv1.ShortLink))
			}
			return l
		},
		empty: func() metav1.Object { return &linkv1.ShortLink{} },
	}).listWatch(), &linkv1.ShortLink{}, 0, toolscache.Indexers{})
	nsInf := toolscache.NewSharedIndexInformer((&streamLW{
		n: nss,
		gen: func(i int) runtime.Object {
			return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
				Name: SyntheticNamespace(i), ResourceVersion: "1", CreationTimestamp: metav1.NewTime(created),
				Labels: map[string]string{"kubernetes.io/metadata.name": SyntheticNamespace(i)},
			}}
		},
		newList: func(items []runtime.Object) runtime.Object {
			l := &corev1.NamespaceList{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}
			for _, o := range items {
				l.Items = append(l.Items, *o.(*corev1.Namespace))
			}
			return l
		},
		empty: func() metav1.Object { return &corev1.Namespace{} },
	}).listWatch(), &corev1.Namespace{}, 0, toolscache.Indexers{toolscache.NamespaceIndex: toolscache.MetaNamespaceIndexFunc})
	if err := links.SetTransform(redirect.TransformShortLink); err != nil {
		return err
	}
	if err := nsInf.SetTransform(redirect.TransformNamespace); err != nil {
		return err
	}
	if err := r.WatchShortLinks(links); err != nil {
		return err
	}
	if err := r.WatchNamespaces(nsInf); err != nil {
		return err
	}
	var wg sync.WaitGroup
	wg.Go(func() { links.RunWithContext(ctx) })
	wg.Go(func() { nsInf.RunWithContext(ctx) })
	wg.Wait()
	return nil
}
