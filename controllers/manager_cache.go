package controllers

import (
	"crypto/sha256"
	"encoding/hex"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	toolscache "k8s.io/client-go/tools/cache"
	"sigs.k8s.io/controller-runtime/pkg/cache"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/claim"
	"github.com/linkforge/linkforge/internal/compactlink"
	"github.com/linkforge/linkforge/internal/explain"
	"github.com/linkforge/linkforge/internal/hostpolicy"
	"github.com/linkforge/linkforge/internal/intern"
)

// ManagerDefaults are the defaults of the manager's scaling flags.
type ManagerDefaults struct {
	// QPS and Burst are the client-side rate limit (--kube-api-qps,
	// --kube-api-burst). A negative QPS turns client-go's token bucket off.
	QPS   float32
	Burst int
	// MaxConcurrentReconciles is the number of ShortLink reconcile workers
	// (--max-concurrent-reconciles).
	MaxConcurrentReconciles int
}

// Defaults are the flag defaults of bin/manager, in one place so that the
// convergence benchmark runs what ships.
//
// No client-side limit: API Priority and Fairness queues and sheds load on
// the API server, per priority level, which a per-process token bucket cannot
// do (it only knows its own requests). controller-runtime's GetConfig turns
// client-go's limiter off for the same reason (QPS -1). A limiter of 100 QPS
// made a manager with N new links take N/100 s for their status patches
// (plus as many Events), however idle the API server was.
//
// 16 workers: a reconcile is one status patch (the decision is a lookup in
// the cache's code index), so convergence is bound by the patch round trip;
// 16 in flight keep the API server busy, as the floor's 8 writers plus the
// Events of the recorder do, without many idle goroutines.
var Defaults = ManagerDefaults{QPS: -1, Burst: 0, MaxConcurrentReconciles: 16}

// GCPercent is the manager's GOGC unless the environment sets one, as in the
// redirector (redirect.GCPercent): most of the heap is the long-lived
// informer cache, and Go's default of 100 lets the heap grow to twice it
// before a collection; 50 keeps it at 1.5x. At 100,000 links (make
// bench-scale) the manager's RSS fell from 2.68 to 2.26 KiB a link, for
// more frequent collections of a heap that is mostly live.
const GCPercent = 50

// Annotations the manager reads; the cache keeps only these.
var (
	keptAnnotations      = []string{argoTrackingAnnotation}
	namespaceAnnotations = []string{hostpolicy.AllowedHostsAnnotation, explain.NotFoundRedirectAnnotation, explain.GoneRedirectAnnotation, claim.DomainAnnotation}
)

// ManagerCacheTransform is the manager's informer transform: it keeps a
// ShortLink as a compactlink.Link (its summary, and the rest packed: a
// plain link takes about 350 bytes, the Link, its packed bytes and the
// summary's strings, where the ShortLink took 1.1 KB), and of
// the ShortLink only what the reconciler and the reaper read (all of spec and
// status; name, namespace, uid, resourceVersion, generation, creation and
// deletion timestamps; the GitOps labels and annotation of
// reaper_gitops.go), and drops the rest: managedFields, the kubectl
// last-applied-configuration annotation (a second copy of the spec), other
// labels and annotations, ownerReferences and finalizers. A Namespace keeps
// its name, uid, resourceVersion, linkforge.io/allowed-hosts annotation
// (the destination policy), fallback annotations (what the Ready messages
// say a finished or scheduled link answers), and its linkforge.io/domain
// annotation and creation time (which namespace a host's listener serves,
// gateway_hosts.go). Other objects lose their managedFields only.
//
// Nothing writes a cached object back whole: the reconciler sends a merge
// patch of status computed between two copies of the cached object, and the
// reaper deletes with UID and resourceVersion preconditions, so dropped
// metadata is never sent as "removed".
func ManagerCacheTransform() toolscache.TransformFunc {
	stripManagedFields := cache.TransformStripManagedFields()
	return func(in any) (any, error) {
		if ns, ok := in.(*corev1.Namespace); ok {
			return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
				Name:              intern.String(ns.Name),
				UID:               ns.UID,
				ResourceVersion:   ns.ResourceVersion,
				CreationTimestamp: ns.CreationTimestamp,
				Annotations:       keepKeys(ns.Annotations, namespaceAnnotations),
			}}, nil
		}
		if packed, ok := in.(*compactlink.Link); ok {
			return packed, nil // transformed already
		}
		link, ok := in.(*linkv1.ShortLink)
		if !ok {
			return stripManagedFields(in)
		}
		m := &link.ObjectMeta
		link.ObjectMeta = metav1.ObjectMeta{
			Name:                       m.Name,
			Namespace:                  intern.String(m.Namespace),
			UID:                        m.UID,
			ResourceVersion:            m.ResourceVersion,
			Generation:                 m.Generation,
			CreationTimestamp:          m.CreationTimestamp,
			DeletionTimestamp:          m.DeletionTimestamp,
			DeletionGracePeriodSeconds: m.DeletionGracePeriodSeconds,
			Labels:                     gitOpsLabels(m.Labels),
			Annotations:                keepKeys(m.Annotations, keptAnnotations),
		}
		// The state is one of a few values, kept once; a code a link both
		// declares and holds, once.
		link.Status.State = linkv1.LinkState(intern.String(string(link.Status.State)))
		if link.Spec.Code == link.Status.Code {
			link.Spec.Code = link.Status.Code
		}
		return compactlink.Pack(link)
	}
}

// gitOpsLabels keeps the labels gitOpsManager reads (nil if none).
func gitOpsLabels(labels map[string]string) map[string]string {
	var out map[string]string
	for k, v := range labels {
		if k != argoInstanceLabel && !slices.ContainsFunc(fluxLabelPrefixes, func(p string) bool { return strings.HasPrefix(k, p) }) {
			continue
		}
		if out == nil {
			out = make(map[string]string, 2)
		}
		out[k] = v
	}
	return out
}

func keepKeys(m map[string]string, keys []string) map[string]string {
	var out map[string]string
	for _, k := range keys {
		if v, ok := m[k]; ok {
			if out == nil {
				out = make(map[string]string, len(keys))
			}
			out[k] = v
		}
	}
	return out
}

// ManagerCacheOptions is the manager's cache: lean objects
// (ManagerCacheTransform: ShortLinks are kept as compactlink.Links, so a
// ShortLink is read from it only as a copy, never with
// client.UnsafeDisableDeepCopy, and client-go's KUBE_CACHE_MUTATION_DETECTOR,
// which compares a cached object with its DeepCopyObject, does not apply), ShortLink informers recorded in index (give the
// same index to the ShortLinkReconciler; nil for a manager without one) and,
// when namespaces is not empty, only the ShortLinks of those namespaces (a
// shard).
func ManagerCacheOptions(namespaces []string, index *CodeIndex) cache.Options {
	opts := cache.Options{DefaultTransform: ManagerCacheTransform()}
	if index != nil {
		opts.NewInformer = index.NewInformer
	}
	if len(namespaces) > 0 {
		opts.DefaultNamespaces = make(map[string]cache.Config, len(namespaces))
		for _, ns := range namespaces {
			opts.DefaultNamespaces[ns] = cache.Config{}
		}
	}
	return opts
}

// DefaultLeaderElectionID is the Lease of the unsharded manager.
const DefaultLeaderElectionID = "manager.linkforge.io"

// LeaderElectionID is the Lease name of the manager of namespaces: the
// default for all namespaces, and one per namespace set for a shard, so that
// shards elect their leaders independently while replicas of one shard (same
// set, in any order) share one Lease.
func LeaderElectionID(namespaces []string) string {
	if len(namespaces) == 0 {
		return DefaultLeaderElectionID
	}
	set := slices.Clone(namespaces)
	slices.Sort(set)
	set = slices.Compact(set)
	sum := sha256.Sum256([]byte(strings.Join(set, ",")))
	return "shard-" + hex.EncodeToString(sum[:5]) + "." + DefaultLeaderElectionID
}

// ParseNamespaces splits a --namespaces value: comma-separated, blanks ignored.
func ParseNamespaces(s string) []string {
	var out []string
	for _, ns := range strings.Split(s, ",") {
		if ns = strings.TrimSpace(ns); ns != "" && !slices.Contains(out, ns) {
			out = append(out, ns)
		}
	}
	return out
}
