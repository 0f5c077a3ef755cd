package controllers

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	logf "sigs.k8s.io/controller-runtime/pkg/log"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

// ReasonReapSkipped is the reason of the Warning event on a finished link
// that the reaper keeps because a GitOps tool manages it.
const ReasonReapSkipped = "ReapSkipped"

const reaperEventAction = "Reap"

// GitOps ownership markers: a link that carries one would be re-created from
// its source after a deletion.
var fluxLabelPrefixes = []string{"kustomize.toolkit.fluxcd.io/", "helm.toolkit.fluxcd.io/"}

const (
	argoInstanceLabel      = "argocd.argoproj.io/instance"
	argoTrackingAnnotation = "argocd.argoproj.io/tracking-id"
)

// gitOpsManager describes the GitOps tool that manages link and the marker
// that says so, or returns "".
func gitOpsManager(link *linkv1.ShortLink) string {
	labels := link.GetLabels()
	var flux []string
	for k := range labels {
		for _, p := range fluxLabelPrefixes {
			if strings.HasPrefix(k, p) {
				flux = append(flux, k)
			}
		}
	}
	if len(flux) > 0 {
		slices.Sort(flux)
		return fmt.Sprintf("Flux (label %s=%s)", flux[0], labels[flux[0]])
	}
	if v, ok := labels[argoInstanceLabel]; ok {
		return fmt.Sprintf("Argo CD (label %s=%s)", argoInstanceLabel, v)
	}
	if _, ok := link.GetAnnotations()[argoTrackingAnnotation]; ok {
		return fmt.Sprintf("Argo CD (annotation %s)", argoTrackingAnnotation)
	}
	return ""
}

// gitOpsWarnings remembers the held links already warned about, by link and
// deadline: every reconcile and every sweep sees a held link again, and one
// event per deadline is enough. The memory is the process's: a restarted
// manager warns again.
type gitOpsWarnings struct {
	mu   sync.Mutex
	seen map[types.NamespacedName]reapWarning
}

type reapWarning struct {
	uid      types.UID
	deadline time.Time
}

// first records w for key and reports whether it is new.
func (g *gitOpsWarnings) first(key types.NamespacedName, w reapWarning) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.seen == nil {
		g.seen = make(map[types.NamespacedName]reapWarning)
	}
	seen := g.seen[key] == w
	g.seen[key] = w
	return !seen
}

func (g *gitOpsWarnings) forget(key types.NamespacedName) {
	g.mu.Lock()
	delete(g.seen, key)
	g.mu.Unlock()
}

// warnOnce records the Warning event of a GitOps-managed link that is due,
// once per link and deadline.
func (r *Reaper) warnOnce(ctx context.Context, link *linkv1.ShortLink, p reapPlan) {
	key := types.NamespacedName{Namespace: link.Namespace, Name: link.Name}
	if !r.warned.first(key, reapWarning{uid: link.UID, deadline: p.deadline}) {
		return
	}
	logf.FromContext(ctx).Info("keeping finished ShortLink managed by GitOps", "shortlink", key, "managedBy", p.managedBy)
	if r.Recorder == nil {
		return
	}
	r.Recorder.Eventf(link, nil, corev1.EventTypeWarning, ReasonReapSkipped, reaperEventAction,
		"finished at %s and due for deletion, but kept: it is managed by %s, which would re-create it. "+
			"Remove it from its source, or set spec.reapPolicy (Delete or Retain)",
		p.finishedAt.UTC().Format(time.RFC3339), p.managedBy)
}

func (r *Reaper) forgetWarning(key types.NamespacedName) { r.warned.forget(key) }
