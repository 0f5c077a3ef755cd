// Package importapply is the cluster side of `linkforge import --apply`:
// it server-side applies the manifests package importer made, with a
// bounded number of concurrent requests, a progress line and a summary.
//
// An import changes only the links it created: each manifest carries its
// source (importer.SourceAnnotation, the file's name and hash, or
// --source), and a link of the same name without that source, made by hand,
// by another file or by an older import, is a Conflict: reported with what
// would change and left as it is, unless Options.Overwrite. A link whose
// code another link of the namespace holds is a Conflict too.
//
// The import reads the links first (a LIST per namespace, or a GET per link
// without list permission), so a re-run of the same file sends nothing for
// the links that would not change. The others are server-side applied by
// the field manager linkforge-import: a field the old shortener no longer
// has (an expiry that was removed) is removed from the ShortLink too.
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
	// Overwrite applies the manifests of links this import did not create
	// (another source's, or made by hand): they are still reported, as
	// overwritten. Without it they are left as they are. A code another
	// link holds is never overwritten.
	Overwrite bool
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
	// Created and Updated were applied; Unchanged were this import's and
	// would not change, so nothing was sent.
	Created, Updated, Unchanged int
	// Matching links were not created by this import but already hold what
	// it has: left as they are (not adopted: they keep their source).
	Matching int
	// Overwritten links were not this import's and were applied
	// (Options.Overwrite); they are in Conflicts too.
	Overwritten int
	// Conflicts lists, in input order, the links that exist and were not
	// created by this import (or whose code another link holds): left as
	// they are, or Overwritten.
	Conflicts []Conflict
	// Applied counts the links applied with Overwrite where the cluster
	// let the import neither list nor get them: new and changed ones are
	// not told apart.
	Applied int
	Failed  []Failure
	Elapsed time.Duration
}

// Skipped is how many conflicts were left as they are.
func (s Summary) Skipped() int { return len(s.Conflicts) - s.Overwritten }

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

	cluster, err := listExisting(ctx, cl, manifests)
	if err != nil {
		return Summary{}, err
	}

	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var (
		counts    [toOverwrite + 1]atomic.Int64
		applied   atomic.Int64
		done      atomic.Int64
		mu        sync.Mutex
		failed    []Failure
		conflicts []Conflict
	)
	fail := func(i int, err error) {
		if fatal(err) {
			cancel(err)
			return
		}
		mu.Lock()
		failed = append(failed, Failure{Index: i, Manifest: manifests[i], Err: err})
		mu.Unlock()
	}
	next := make(chan int)
	var wg sync.WaitGroup
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				m := manifests[i]
				l, holder, known, err := cluster.lookup(ctx, cl, m)
				switch {
				case err != nil:
					fail(i, err)
				case !known && !opts.Overwrite:
					fail(i, fmt.Errorf("the import may read neither the ShortLinks of namespace %s (list) nor this one (get), so it cannot tell whether it created it: grant get or list on shortlinks.linkforge.io, or pass --overwrite to apply it whatever it is", m.Metadata.Namespace))
				case !known:
					if err := applyOne(ctx, cl, m, opts.Force); err != nil {
						fail(i, err)
					} else {
						applied.Add(1)
					}
				default:
					v, conflict := judge(m, l, holder, opts.Overwrite)
					if v == toCreate || v == toUpdate || v == toOverwrite {
						if err := applyOne(ctx, cl, m, opts.Force); err != nil {
							fail(i, err)
							break
						}
					}
					counts[v].Add(1)
					if conflict != nil {
						conflict.Index = i
						mu.Lock()
						conflicts = append(conflicts, *conflict)
						mu.Unlock()
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
	sort.Slice(conflicts, func(a, b int) bool { return conflicts[a].Index < conflicts[b].Index })
	return Summary{
		Created:     int(counts[toCreate].Load()),
		Updated:     int(counts[toUpdate].Load()),
		Unchanged:   int(counts[toLeave].Load()),
		Matching:    int(counts[toMatch].Load()),
		Overwritten: int(counts[toOverwrite].Load()),
		Conflicts:   conflicts,
		Applied:     int(applied.Load()),
		Failed:      failed,
		Elapsed:     time.Since(start),
	}, nil
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func key(m importer.Manifest) string { return m.Metadata.Namespace + "/" + m.Metadata.Name }

// applyOne server-side applies m.
func applyOne(ctx context.Context, cl client.Client, m importer.Manifest, force bool) error {
	data, err := json.Marshal(m)
	if err != nil {
		return err
	}
	u := &unstructured.Unstructured{}
	if err := json.Unmarshal(data, &u.Object); err != nil {
		return err
	}
	opts := []client.ApplyOption{client.FieldOwner(FieldManager)}
	if force {
		opts = append(opts, client.ForceOwnership)
	}
	return cl.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), opts...)
}

// clusterLinks is what the import read of the namespaces it writes to.
type clusterLinks struct {
	// links are the ShortLinks of the manifests' names, as assess found
	// them; nil when the import may not list them (then lookup gets each).
	links map[string]*found
	// codes maps namespace/code to the names of the links that hold it
	// (spec.code, or the code it is served under).
	codes map[string][]string
}

// lookup returns the link of m's name (nil: there is none) and the other
// link that holds m's code (""). known is false when the cluster let the
// import neither list nor get it.
func (c *clusterLinks) lookup(ctx context.Context, cl client.Client, m importer.Manifest) (l *found, holder string, known bool, err error) {
	if c.links != nil {
		l = c.links[key(m)]
		if m.Spec.Code != "" {
			for _, name := range c.codes[m.Metadata.Namespace+"/"+m.Spec.Code] {
				if name != m.Metadata.Name {
					holder = m.Metadata.Namespace + "/" + name
					break
				}
			}
		}
		return l, holder, true, nil
	}
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(listGVK.GroupVersion().WithKind("ShortLink"))
	err = cl.Get(ctx, client.ObjectKey{Namespace: m.Metadata.Namespace, Name: m.Metadata.Name}, u)
	switch {
	case apierrors.IsForbidden(err):
		return nil, "", false, nil
	case apierrors.IsNotFound(err) && !isResourceNotFound(err):
		return nil, "", true, nil
	case err != nil:
		return nil, "", false, err
	}
	return assess(m, liveFrom(u)), "", true, nil
}

// listExisting lists the ShortLinks of the namespaces the manifests go to,
// a page at a time, keeping those of the manifests' names and every code.
// Without list permission it returns no links: lookup gets each one.
func listExisting(ctx context.Context, cl client.Client, manifests []importer.Manifest) (*clusterLinks, error) {
	namespaces := map[string]bool{}
	wanted := make(map[string]int, len(manifests))
	for i, m := range manifests {
		namespaces[m.Metadata.Namespace] = true
		wanted[key(m)] = i
	}
	read := &clusterLinks{links: map[string]*found{}, codes: map[string][]string{}}
	for ns := range namespaces {
		opts := []client.ListOption{client.InNamespace(ns), client.Limit(500)}
		for {
			var list unstructured.UnstructuredList
			list.SetGroupVersionKind(listGVK)
			if err := cl.List(ctx, &list, opts...); err != nil {
				if apierrors.IsForbidden(err) {
					return &clusterLinks{}, nil
				}
				if fatal(err) {
					return nil, describe(err, manifests)
				}
				return nil, fmt.Errorf("listing the ShortLinks of namespace %s: %w", ns, err)
			}
			for i := range list.Items {
				u := &list.Items[i]
				k := u.GetNamespace() + "/" + u.GetName()
				if i, ok := wanted[k]; ok {
					read.links[k] = assess(manifests[i], liveFrom(u))
				}
				code, _, _ := unstructured.NestedString(u.Object, "spec", "code")
				served, _, _ := unstructured.NestedString(u.Object, "status", "code")
				for _, c := range []string{code, served} {
					// Two holders are enough to name one that is not the
					// manifest's own link.
					if k := u.GetNamespace() + "/" + c; c != "" && len(read.codes[k]) < 2 && !contains(read.codes[k], u.GetName()) {
						read.codes[k] = append(read.codes[k], u.GetName())
					}
				}
			}
			if list.GetContinue() == "" {
				break
			}
			opts = []client.ListOption{client.InNamespace(ns), client.Limit(500), client.Continue(list.GetContinue())}
		}
	}
	return read, nil
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
