package controllers

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/compactlink"
	"github.com/linkforge/linkforge/internal/explain"
	"github.com/linkforge/linkforge/internal/hostpolicy"
)

// The destination policy (internal/hostpolicy) as the controller reads it:
// a Namespace's linkforge.io/allowed-hosts annotation and every
// DestinationDenyList, from the manager's cache. The admission policies of
// config/destination-policy refuse new URLs the same rule refuses; the
// controller judges every link, so links admitted before a list changed, or
// that admission could not compare exactly, are Blocked and not served.

// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups=linkforge.io,resources=destinationdenylists,verbs=get;list;watch

// destinationPolicy returns the policy of the links of namespace. known is
// false while the manager's cache has not seen the namespace yet (a link's
// watch can run ahead of the Namespace's): the link is judged once it has.
func (r *ShortLinkReconciler) destinationPolicy(ctx context.Context, namespace string) (p hostpolicy.Policy, known bool, err error) {
	p.Namespace = namespace
	var ns corev1.Namespace
	switch err := r.Get(ctx, types.NamespacedName{Name: namespace}, &ns); {
	case apierrors.IsNotFound(err):
		return p, false, nil
	case err != nil:
		return p, false, fmt.Errorf("reading namespace %s: %w", namespace, err)
	}
	if value, ok := ns.Annotations[hostpolicy.AllowedHostsAnnotation]; ok {
		l := hostpolicy.Parse(value)
		p.Allow = &l
	}
	var lists linkv1.DestinationDenyListList
	if err := r.List(ctx, &lists, client.UnsafeDisableDeepCopy); err != nil {
		return p, false, fmt.Errorf("listing DestinationDenyLists: %w", err)
	}
	for i := range lists.Items {
		p.Deny = append(p.Deny, r.denyLists.get(&lists.Items[i]))
	}
	return p, true, nil
}

// parsedDenyLists keeps each DestinationDenyList parsed, by uid and
// resourceVersion, so that a reconcile does not parse up to 1024 entries
// per list again; entries of older versions go with the next delete or
// update event.
type parsedDenyLists struct {
	mu     sync.Mutex
	parsed map[types.UID]parsedDenyList
}

type parsedDenyList struct {
	resourceVersion string
	named           hostpolicy.Named
}

func (c *parsedDenyLists) get(d *linkv1.DestinationDenyList) hostpolicy.Named {
	c.mu.Lock()
	defer c.mu.Unlock()
	if p, ok := c.parsed[d.UID]; ok && p.resourceVersion == d.ResourceVersion {
		return p.named
	}
	named := hostpolicy.Named{Name: d.Name, List: denyList(d)}
	if c.parsed == nil {
		c.parsed = map[types.UID]parsedDenyList{}
	}
	c.parsed[d.UID] = parsedDenyList{resourceVersion: d.ResourceVersion, named: named}
	return named
}

func (c *parsedDenyLists) forget(uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	delete(c.parsed, uid)
}

func denyList(d *linkv1.DestinationDenyList) hostpolicy.List {
	entries := make([]string, len(d.Spec.Hosts))
	for i, h := range d.Spec.Hosts {
		entries[i] = string(h)
	}
	return hostpolicy.FromEntries(entries)
}

// namespaceHandler re-queues a namespace's links when its allowed hosts
// change (or a new namespace has some: its links may have been judged
// before the cache saw it), and the links that do not redirect now when its
// fallback annotations change: their Ready messages say what they answer.
type namespaceHandler struct{ r *ShortLinkReconciler }

var _ handler.TypedEventHandler[client.Object, reconcile.Request] = &namespaceHandler{}

func allowedHosts(obj client.Object) (string, bool) {
	v, ok := obj.GetAnnotations()[hostpolicy.AllowedHostsAnnotation]
	return v, ok
}

func (h *namespaceHandler) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	if _, ok := allowedHosts(e.Object); ok {
		h.r.enqueueLinks(ctx, q, e.Object.GetName(), nil)
	}
}

func (h *namespaceHandler) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	oldValue, hadList := allowedHosts(e.ObjectOld)
	newValue, hasList := allowedHosts(e.ObjectNew)
	switch {
	case hadList != hasList || oldValue != newValue:
		h.r.enqueueLinks(ctx, q, e.ObjectNew.GetName(), nil)
	case explain.NamespaceFallbacks(e.ObjectOld.GetAnnotations()) != explain.NamespaceFallbacks(e.ObjectNew.GetAnnotations()):
		// What the Ready message says of a link that does not redirect now.
		h.r.enqueueLinks(ctx, q, e.ObjectNew.GetName(), func(link compactlink.Summary, _ func() *linkv1.ShortLink) bool {
			switch link.State {
			case linkv1.StateExpired, linkv1.StateExhausted, linkv1.StateScheduled, linkv1.StateKept:
				return true
			}
			return false
		})
	}
}

func (h *namespaceHandler) Delete(context.Context, event.DeleteEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}

func (h *namespaceHandler) Generic(context.Context, event.GenericEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}

// denyListHandler re-queues the links whose host an added, changed or
// removed DestinationDenyList entry matches, and the links not judged yet.
type denyListHandler struct{ r *ShortLinkReconciler }

var _ handler.TypedEventHandler[client.Object, reconcile.Request] = &denyListHandler{}

func (h *denyListHandler) Create(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.changed(ctx, q, hostpolicy.List{}, denyList(e.Object.(*linkv1.DestinationDenyList)))
}

func (h *denyListHandler) Update(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.r.denyLists.forget(e.ObjectOld.GetUID())
	h.changed(ctx, q, denyList(e.ObjectOld.(*linkv1.DestinationDenyList)), denyList(e.ObjectNew.(*linkv1.DestinationDenyList)))
}

func (h *denyListHandler) Delete(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	h.r.denyLists.forget(e.Object.GetUID())
	if d, ok := e.Object.(*linkv1.DestinationDenyList); ok {
		h.changed(ctx, q, denyList(d), hostpolicy.List{})
	}
}

func (h *denyListHandler) Generic(context.Context, event.GenericEvent, workqueue.TypedRateLimitingInterface[reconcile.Request]) {
}

func (h *denyListHandler) changed(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], before, after hostpolicy.List) {
	changed := hostpolicy.Changed(before, after)
	if len(changed.Patterns) == 0 {
		return
	}
	h.r.enqueueLinks(ctx, q, metav1.NamespaceAll, func(_ compactlink.Summary, unpack func() *linkv1.ShortLink) bool {
		link := unpack()
		if link.Status.CanonicalURL == "" {
			return true // not judged yet, or invalid: cheap to look at again
		}
		_, ok := changed.Match(hostpolicy.Key(hostpolicy.HostOf(link.Status.CanonicalURL)))
		return ok || routingHostMatches(link, changed)
	})
}

// enqueueLinks adds the cached links of namespace ("": all) that keep
// returns true for (nil: all) to q. keep reads a link's summary, and calls
// unpack for the rest of it (a copy of a compact link: a deny-list change
// unpacks every link, one at a time).
func (r *ShortLinkReconciler) enqueueLinks(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request], namespace string, keep func(s compactlink.Summary, unpack func() *linkv1.ShortLink) bool) {
	objs, err := r.Index.links(namespace)
	if err != nil {
		logf.FromContext(ctx).Error(err, "re-queueing links after a destination policy change", "namespace", namespace)
		return
	}
	for _, obj := range objs {
		s, ok := compactlink.SummaryOf(obj)
		if !ok {
			continue
		}
		if keep != nil && !keep(s, func() *linkv1.ShortLink { link, _ := compactlink.Of(obj); return link }) {
			continue
		}
		q.Add(reconcile.Request{NamespacedName: types.NamespacedName{Namespace: s.Namespace, Name: s.Name}})
	}
}

// links returns the cached links of namespace ("": all), from every
// informer of the index. The objects are the cache's own: read only.
func (c *CodeIndex) links(namespace string) ([]any, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if len(c.indexers) == 0 {
		return nil, errNoCodeIndex
	}
	var out []any
	for _, indexer := range c.indexers {
		if namespace == metav1.NamespaceAll {
			out = append(out, indexer.List()...)
			continue
		}
		objs, err := indexer.ByIndex(toolscache.NamespaceIndex, namespace)
		if err != nil {
			return nil, err
		}
		out = append(out, objs...)
	}
	return out, nil
}
