// Package importapply is the cluster side of `linkforge import --apply`:
// it server-side applies the manifests package importer made, with a
// bounded number of concurrent requests, a progress line and a summary.
//
// Server-side apply makes a re-run idempotent: the same manifests applied
// again by the same field manager change nothing (the API server does not
// even write the object), and a field the old shortener no longer has
// (an expiry that was removed) is removed from the ShortLink too.
package importapply

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/linkforge/linkforge/internal/importer"
)

// listGVK is the kind of a list of ShortLinks (api/v1alpha1), named here so
// that a metadata-only list needs no scheme.
var listGVK = schema.GroupVersionKind{Group: "linkforge.io", Version: "v1alpha1", Kind: "ShortLinkList"}

// FieldManager owns the fields an import writes.
const FieldManager = "linkforge-import"

// DefaultWorkers is how many apply requests are in flight at once. The API
// server runs them in parallel up to its max-mutating-requests-inflight
// (200); on the 2-core machine of the measurement in docs/import.md, 16
// kept it busy and more gained nothing.
const DefaultWorkers = 16

// MaxWorkers bounds --workers: beyond it, an import only competes with the
// cluster's other writers (API Priority and Fairness queues it anyway).
const MaxWorkers = 64

// Options says how to apply.
type Options struct {
	Workers int // 1..MaxWorkers; 0 is DefaultWorkers
	// Force takes over fields another manager owns (kubectl's
	// --force-conflicts); without it such a link fails with the conflict.
	Force bool
	// Progress, when not nil, receives a progress line rewritten in place
	// (with \r) every ProgressInterval, and a newline at the end: give it
	// a terminal only.
	Progress         io.Writer
	ProgressInterval time.Duration
}

// Failure is a manifest the API server refused.
type Failure struct {
	Index    int // into the manifests
	Manifest importer.Manifest
	Err      error
}

// Summary is what an apply did.
type Summary struct {
	Created, Updated, Unchanged int
	// Applied counts the links applied when the existing ones could not be
	// listed first (no list permission): then created, updated and
	// unchanged cannot be told apart.
	Applied int
	Failed  []Failure
	Elapsed time.Duration
}

// Apply applies every manifest, cl being a client of the cluster. The error
// is for a failure that dooms every request (no CRD, bad credentials, the
// cluster unreachable): the apply stops at once. Refusals of single links
// are in Summary.Failed, in input order.
func Apply(ctx context.Context, cl client.Client, manifests []importer.Manifest, opts Options) (Summary, error) {
	start := time.Now()
	workers := opts.Workers
	if workers <= 0 {
		workers = DefaultWorkers
	}
	if workers > MaxWorkers {
		workers = MaxWorkers
	}
	if workers > len(manifests) {
		workers = max(len(manifests), 1)
	}

	existing, err := listExisting(ctx, cl, manifests)
	if err != nil {
		return Summary{}, err
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		created, updated, unchanged, applied, done atomic.Int64
		mu                                         sync.Mutex
		failed                                     []Failure
	)
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				m := manifests[i]
				generation, err := applyOne(ctx, cl, m, opts.Force)
				switch {
				case err != nil && fatal(err):
					cancel(err)
				case err != nil:
					mu.Lock()
					failed = append(failed, Failure{Index: i, Manifest: m, Err: err})
					mu.Unlock()
				case existing == nil:
					applied.Add(1)
				default:
					before, ok := existing[key(m)]
					switch {
					case !ok:
						created.Add(1)
					case before.generation == generation && sameMetadata(before, m):
						unchanged.Add(1)
					default:
						updated.Add(1)
					}
				}
				done.Add(1)
			}
		}()
	}

	stopProgress := startProgress(opts, len(manifests), &done, start)
feed:
	for i := range manifests {
		select {
		case next <- i:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	stopProgress()

	if cause := context.Cause(ctx); cause != nil {
		return Summary{}, describe(cause, manifests)
	}
	sort.Slice(failed, func(a, b int) bool { return failed[a].Index < failed[b].Index })
	return Summary{
		Created:   int(created.Load()),
		Updated:   int(updated.Load()),
		Unchanged: int(unchanged.Load()),
		Applied:   int(applied.Load()),
		Failed:    failed,
		Elapsed:   time.Since(start),
	}, nil
}

func key(m importer.Manifest) string { return m.Metadata.Namespace + "/" + m.Metadata.Name }

// applyOne server-side applies m and returns the generation the API server
// answered with. (Not the resource version: the API server of the
// measurement wrote every re-apply, bumping it, though nothing changed.)
func applyOne(ctx context.Context, cl client.Client, m importer.Manifest, force bool) (int64, error) {
	data, err := json.Marshal(m)
	if err != nil {
		return 0, err
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(data, &u.Object); err != nil {
		return 0, err
	}
	opts := []client.ApplyOption{client.FieldOwner(FieldManager)}
	if force {
		opts = append(opts, client.ForceOwnership)
	}
	if err := cl.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), opts...); err != nil {
		return 0, err
	}
	return u.GetGeneration(), nil
}

// existingLink is what the list said of a link before the apply.
type existingLink struct {
	generation  int64
	labels      map[string]string
	annotations map[string]string
}

// sameMetadata: the labels and annotations m sets were there already.
func sameMetadata(before existingLink, m importer.Manifest) bool {
	for k, v := range m.Metadata.Labels {
		if got, ok := before.labels[k]; !ok || got != v {
			return false
		}
	}
	for k, v := range m.Metadata.Annotations {
		if got, ok := before.annotations[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// listExisting lists the ShortLinks of the namespaces the manifests go to,
// metadata only and a page at a time, to tell created, updated and
// unchanged links apart afterwards. Without list permission it returns nil
// and the summary only counts applied links.
func listExisting(ctx context.Context, cl client.Client, manifests []importer.Manifest) (map[string]existingLink, error) {
	namespaces := map[string]bool{}
	for _, m := range manifests {
		namespaces[m.Metadata.Namespace] = true
	}
	existing := map[string]existingLink{}
	for ns := range namespaces {
		var list metav1.PartialObjectMetadataList
		list.SetGroupVersionKind(listGVK)
		opts := []client.ListOption{client.InNamespace(ns), client.Limit(1000)}
		for {
			if err := cl.List(ctx, &list, opts...); err != nil {
				if apierrors.IsForbidden(err) {
					return nil, nil
				}
				if fatal(err) {
					return nil, describe(err, manifests)
				}
				return nil, fmt.Errorf("listing the ShortLinks of namespace %s: %w", ns, err)
			}
			for _, item := range list.Items {
				existing[item.Namespace+"/"+item.Name] = existingLink{generation: item.Generation, labels: item.Labels, annotations: item.Annotations}
			}
			if list.Continue == "" {
				break
			}
			opts = []client.ListOption{client.InNamespace(ns), client.Limit(1000), client.Continue(list.Continue)}
		}
	}
	return existing, nil
}

// ErrNoCRD is what Apply returns when the cluster has no ShortLink CRD.
var ErrNoCRD = errors.New("the ShortLink CRD is not installed in this cluster: run `make install` or `kubectl apply -k config/crd` from a linkforge checkout (or install the Helm chart)")

// fatal tells errors that every other request would meet too.
func fatal(err error) bool {
	var netErr net.Error
	var urlErr *url.Error
	return meta.IsNoMatchError(err) || isResourceNotFound(err) || apierrors.IsUnauthorized(err) ||
		errors.As(err, &netErr) || errors.As(err, &urlErr)
}

// isResourceNotFound is a 404 for the resource, not for one object.
func isResourceNotFound(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d == nil || d.Name == ""
}

func describe(err error, manifests []importer.Manifest) error {
	switch {
	case meta.IsNoMatchError(err) || isResourceNotFound(err):
		return ErrNoCRD
	case apierrors.IsUnauthorized(err):
		return fmt.Errorf("the cluster rejected your credentials (401 Unauthorized): log in again, or pick other credentials with --kubeconfig, --context or --user")
	}
	return fmt.Errorf("cannot reach the cluster: %w (is it running? is --kubeconfig/--context the one you mean?); %d link(s) to apply, re-run to finish: applying is idempotent", err, len(manifests))
}

// startProgress writes "applied N/M links (X/s)" every interval until the
// returned function is called, which writes the last line and a newline.
func startProgress(opts Options, total int, done *atomic.Int64, start time.Time) func() {
	if opts.Progress == nil {
		return func() {}
	}
	interval := opts.ProgressInterval
	if interval <= 0 {
		interval = 200 * time.Millisecond
	}
	write := func() {
		_, _ = fmt.Fprintf(opts.Progress, "\r%s", ProgressLine(int(done.Load()), total, time.Since(start)))
	}
	stop := make(chan struct{})
	finished := make(chan struct{})
	go func() {
		defer close(finished)
		ticker := time.NewTicker(interval)
		defer ticker.Stop()
		for {
			select {
			case <-ticker.C:
				write()
			case <-stop:
				return
			}
		}
	}()
	return func() {
		close(stop)
		<-finished
		write()
		_, _ = fmt.Fprintln(opts.Progress)
	}
}

// ProgressLine is one frame of the progress bar:
// [=========>          ]  45000/100000 links  1234/s  ETA 44s
func ProgressLine(done, total int, elapsed time.Duration) string {
	const width = 30
	filled := width
	if total > 0 {
		filled = done * width / total
	}
	bar := make([]byte, width)
	for i := range bar {
		switch {
		case i < filled:
			bar[i] = '='
		case i == filled:
			bar[i] = '>'
		default:
			bar[i] = ' '
		}
	}
	rate := 0.0
	if elapsed > 0 {
		rate = float64(done) / elapsed.Seconds()
	}
	eta := "--"
	if rate > 0 && done < total {
		eta = time.Duration(float64(total-done) / rate * float64(time.Second)).Round(time.Second).String()
	} else if done >= total {
		eta = "0s"
	}
	digits := len(fmt.Sprint(total))
	return fmt.Sprintf("[%s] %*d/%d links  %4.0f/s  ETA %-6s", bar, digits, done, total, rate, eta)
}
