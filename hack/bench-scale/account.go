package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/google/pprof/profile"
)

// Memory per link, accounted: with -heap-profiles, each binary's heap is
// profiled before the first link (idle) and with the N links of the first
// round (full), every allocation of about memProfileRate bytes sampled
// (GODEBUG=memprofilerate), and the live bytes the N links added are
// split by what holds them: the allocation site, read from the innermost
// frame of the stack that names an owner (ownerRules). The result is per
// link, before Go's GC headroom (GOGC) and the allocator's free pages, so
// it is less than the RSS per link beside it.

// memProfileRate is the sampling of the profiles: one allocation per 4 KiB
// on average (Go's default, 512 KiB, leaves about 15 samples of a 10,000
// links' redirector heap; this gives thousands, for a few percent more CPU
// while the links arrive).
const memProfileRate = 4096

// owner is a category of live memory and the functions whose allocations
// it counts (substrings of the function's full name).
type owner struct {
	name  string
	funcs []string
}

// The owners of each binary's memory, matched against the frames of an
// allocation's stack from the innermost out: the first frame that one of
// them names decides.
var (
	redirectorOwners = []owner{
		{"Link (the index entry), linkMore", []string{"internal/redirect.NewLink"}},
		{"link strings kept from the decoded object (name, uid, resourceVersion, code, url)", []string{"github.com/go-json-experiment/json", "internal/redirect.Location", "internal/redirect.decodeLink"}},
		{"routing (compiled rules, variants, their descriptions)", []string{"internal/rules."}},
		{"card", []string{"internal/redirect.newLinkCard", "internal/pages."}},
		{"use counters (uses.Counter, split counts)", []string{"internal/uses."}},
		{"informer store (keys, map)", []string{"k8s.io/client-go/tools/cache"}},
		{"index (shard maps, tombstones)", []string{"internal/redirect.(*shard)", "internal/redirect.(*Index)"}},
		{"click events, access log", []string{"internal/events.", "internal/redirect.(*accessLog)"}},
		{"peers", []string{"internal/peer.", "internal/redirect.(*peerTable)"}},
		{"interned strings (namespaces)", []string{"internal/intern."}},
	}
	managerOwners = []owner{
		{"compact links (internal/compactlink: the Link with its summary, the packed bytes)", []string{"internal/compactlink."}},
		{"strings the summary keeps from the decoded ShortLink (name, resourceVersion, codes)", []string{"sigs.k8s.io/json", "encoding/json", "k8s.io/apimachinery/pkg/runtime/serializer", "k8s.io/apimachinery/pkg/apis/meta/v1.(*Time)"}},
		{"the cache transform (kept labels and annotations)", []string{"ManagerCacheTransform", "controllers.gitOpsLabels", "controllers.keepKeys"}},
		{"client-go store and indexes (keys, namespace and code-bucket sets)", []string{"k8s.io/client-go/tools/cache"}},
		{"code expectations", []string{"controllers.(*expectations)", "controllers.(*codeExpectations)"}},
		{"work queue", []string{"k8s.io/client-go/util/workqueue", "sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue"}},
		{"interned strings", []string{"internal/intern."}},
	}
)

// heapUse is a profile's live bytes by owner, then by allocation site
// (the innermost frame: the runtime's own are not in heap profiles), and
// by site for what no owner names.
type heapUse struct {
	owners map[string]map[string]float64
	other  map[string]float64
}

// profilerFrames are in the allocations of the profile's own making (its
// buffers, its compressor): not the binary's.
var profilerFrames = []string{"runtime/pprof.", "net/http/pprof.", "compress/flate."}

func readHeap(path string, owners []owner) (heapUse, error) {
	f, err := os.Open(path)
	if err != nil {
		return heapUse{}, err
	}
	defer func() { _ = f.Close() }()
	p, err := profile.Parse(f)
	if err != nil {
		return heapUse{}, fmt.Errorf("%s: %w", path, err)
	}
	inuse := slices.IndexFunc(p.SampleType, func(st *profile.ValueType) bool { return st.Type == "inuse_space" })
	if inuse < 0 {
		return heapUse{}, fmt.Errorf("%s: no inuse_space samples", path)
	}
	u := heapUse{owners: map[string]map[string]float64{}, other: map[string]float64{}}
samples:
	for _, s := range p.Sample {
		var funcs []string
		for _, loc := range s.Location {
			for _, line := range loc.Line { // the innermost (inlined) first
				if line.Function == nil {
					continue
				}
				for _, pf := range profilerFrames {
					if strings.HasPrefix(line.Function.Name, pf) {
						continue samples
					}
				}
				funcs = append(funcs, line.Function.Name)
			}
		}
		if len(funcs) == 0 {
			continue
		}
		site, v := shortName(funcs[0]), float64(s.Value[inuse])
		name := ownerOf(funcs, owners)
		if name == "" {
			u.other[site] += v
			continue
		}
		if u.owners[name] == nil {
			u.owners[name] = map[string]float64{}
		}
		u.owners[name][site] += v
	}
	return u, nil
}

// shortName is a function's name without its package's path nor its type
// arguments: "k8s.io/client-go/tools/cache.(*threadSafeMap).updateLocked"
// is "cache.(*threadSafeMap).updateLocked".
func shortName(f string) string {
	if i, j := strings.IndexByte(f, '['), strings.LastIndexByte(f, ']'); i >= 0 && j > i {
		f = f[:i+1] + "…" + f[j:]
	}
	head := f
	if i := strings.IndexAny(f, "[("); i >= 0 {
		head = f[:i]
	}
	return f[strings.LastIndexByte(head, '/')+1:]
}

// ownerOf is the owner of an allocation whose stack is funcs (innermost
// first), or "".
func ownerOf(funcs []string, owners []owner) string {
	for _, f := range funcs {
		for _, o := range owners {
			for _, sub := range o.funcs {
				if strings.Contains(f, sub) {
					return o.name
				}
			}
		}
	}
	return ""
}

// saveHeapProfiles saves both binaries' heap profiles as <name>-<when>.heap.
func (b *bench) saveHeapProfiles(ctx context.Context, when string) error {
	if err := b.saveHeapProfile(ctx, "manager-"+when, b.mgrPprof); err != nil {
		return err
	}
	return b.saveHeapProfile(ctx, "redirector-"+when, b.rdrPprof)
}

// accountRows adds the rows of each binary's live bytes per link by owner
// and allocation site: the full profile less the idle one, over n links.
func (b *bench) accountRows() error {
	for _, bin := range []struct {
		name   string
		owners []owner
	}{{"redirector", redirectorOwners}, {"manager", managerOwners}} {
		idle, err := readHeap(filepath.Join(b.profiles, bin.name+"-idle.heap"), bin.owners)
		if err != nil {
			return err
		}
		full, err := readHeap(filepath.Join(b.profiles, bin.name+"-full.heap"), bin.owners)
		if err != nil {
			return err
		}
		var total float64
		for _, o := range bin.owners {
			v, sites := b.perLinkSites(full.owners[o.name], idle.owners[o.name])
			total += v
			if sites != "" {
				b.row(fmt.Sprintf("%s live bytes per link: %s", bin.name, o.name), "%.0f B (%s)", v, sites)
			}
		}
		v, sites := b.perLinkSites(full.other, idle.other)
		total += v
		b.row(fmt.Sprintf("%s live bytes per link: other", bin.name), "%.0f B (%s)", v, sites)
		b.row(fmt.Sprintf("%s live bytes per link: total (heap profiles, one sample per %d B allocated)", bin.name, memProfileRate), "%.0f B", total)
	}
	return nil
}

// perLinkSites is what full holds beyond idle, per link, and its three
// largest allocation sites ("" if nothing is left of them).
func (b *bench) perLinkSites(full, idle map[string]float64) (float64, string) {
	type site struct {
		f string
		v float64
	}
	keys := mergedKeys(full, idle)
	sites := make([]site, 0, len(keys))
	var sum float64
	for f := range keys {
		v := (full[f] - idle[f]) / float64(b.n)
		sum += v
		sites = append(sites, site{f, v})
	}
	slices.SortFunc(sites, func(a, b site) int { return cmp.Compare(b.v, a.v) })
	var top []string
	for _, s := range sites[:min(3, len(sites))] {
		if s.v >= 0.5 {
			top = append(top, fmt.Sprintf("%s %.0f", s.f, s.v))
		}
	}
	return sum, strings.Join(top, "; ")
}

func mergedKeys(ms ...map[string]float64) map[string]struct{} {
	keys := map[string]struct{}{}
	for _, m := range ms {
		for k := range m {
			keys[k] = struct{}{}
		}
	}
	return keys
}
