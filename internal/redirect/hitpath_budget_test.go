package redirect

import (
	"fmt"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/uses"
)

// The hit path's budget in instructions is internal/hitpath's
// TestRedirectorInstructionBudget (under callgrind). Counting a use is 15
// of them: a nil check, a flag test and an atomic add on the link's
// counter. What instructions do not show is memory: the counter is a cache
// line of its own, and with many links it is not in the cache when a
// request comes. BenchmarkCountingCache measures that.

// BenchmarkCountingCache measures what counting uses costs the decision
// function (routing, lookup, expiry, the atomic add) on one goroutine as
// the links outgrow the caches: 1,000, 10,000 and 100,000 unlimited links,
// each asked for in turn in a scattered order, counting off and on in
// alternating rounds of the same run (every link used once before, so no
// round marks a counter dirty). It reports the time per request of each,
// medians of 7 rounds, and their difference.
func BenchmarkCountingCache(b *testing.B) {
	for _, links := range []int{1_000, 10_000, 100_000} {
		b.Run(fmt.Sprintf("links=%d", links), func(b *testing.B) {
			off, paths := countingRedirector(links, nil)
			on, _ := countingRedirector(links, uses.New(uses.Options{}))
			now := instant(time.Now())
			for _, p := range paths {
				on.answer("GET", "go.example.com", p, "", now)
			}
			n := max(1_000_000, 4*links)
			round := func(r *Redirector) time.Duration {
				start := time.Now()
				for i := range n {
					// 7919 is prime, so every link comes once in each cycle.
					if a := r.answer("GET", "go.example.com", paths[(i*7919)%links], "", now); a.resp.status != 302 {
						panic(a.resp.status)
					}
				}
				return time.Since(start)
			}
			var tOff, tOn []time.Duration
			for b.Loop() {
				for range 7 {
					tOff = append(tOff, round(off))
					tOn = append(tOn, round(on))
				}
			}
			slices.Sort(tOff)
			slices.Sort(tOn)
			mOff := float64(tOff[len(tOff)/2].Nanoseconds()) / float64(n)
			mOn := float64(tOn[len(tOn)/2].Nanoseconds()) / float64(n)
			b.ReportMetric(mOff, "ns/req-off")
			b.ReportMetric(mOn, "ns/req-on")
			b.ReportMetric(mOn-mOff, "ns/req-counting")
		})
	}
}

// countingRedirector is a ready Redirector with links unlimited links (and
// counting, if u is set), and their paths.
func countingRedirector(links int, u *uses.Uses) (*Redirector, []string) {
	r := New(Options{Uses: u})
	r.ready.Store(true)
	created := metav1.NewTime(time.Now().Add(-time.Hour))
	paths := make([]string, links)
	for i := range links {
		in := &linkv1.ShortLink{
			ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%d", i%100), Name: fmt.Sprintf("l-%d", i), Generation: 1,
				ResourceVersion: "1", CreationTimestamp: created},
			Spec:   linkv1.ShortLinkSpec{URL: fmt.Sprintf("https://example.com/%d", i)},
			Status: linkv1.ShortLinkStatus{Code: fmt.Sprintf("c%09d", i), ConfirmedGeneration: 1, ObservedGeneration: 1},
		}
		l := NewLink(in)
		r.attachUses(nil, l)
		r.index.Add(l)
		paths[i] = "/" + in.Namespace + "/" + in.Status.Code
	}
	return r, paths
}
