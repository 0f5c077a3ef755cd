package redirect

import (
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/uses"
)

// BenchmarkCountingOverhead measures what counting uses costs the request
// path: the decision function (routing, lookup, expiry, counting) answering
// GETs for 10,000 unlimited links from every P at once, with counting off and
// on in alternating rounds of the same run. It reports the time per request
// of each and their throughput ratio (goal: on/off >= 0.95).
func BenchmarkCountingOverhead(b *testing.B) {
	const links, perRound, rounds = 10_000, 2_000_000, 5
	build := func(counting *uses.Uses) (*Redirector, []string) {
		r := New(Options{Uses: counting})
		r.ready.Store(true)
		paths := make([]string, links)
		for i := range links {
			in := &linkv1.ShortLink{
				ObjectMeta: metav1.ObjectMeta{Namespace: fmt.Sprintf("ns-%d", i%100), Name: fmt.Sprintf("l-%d", i), Generation: 1,
					ResourceVersion: "1", CreationTimestamp: metav1.NewTime(time.Now().Add(-time.Hour))},
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
	off, paths := build(nil)
	on, _ := build(uses.New(uses.Options{}))
	workers := 8
	run := func(r *Redirector) time.Duration {
		start := time.Now()
		var wg sync.WaitGroup
		for w := range workers {
			wg.Go(func() {
				now := time.Now()
				for i := w; i < perRound; i += workers {
					if a := r.answer("GET", "go.example.com", paths[i%links], "", instant(now)); a.resp.status != 302 {
						panic(a.resp.status)
					}
				}
			})
		}
		wg.Wait()
		return time.Since(start)
	}
	var tOff, tOn []time.Duration
	for b.Loop() {
		for range rounds {
			tOff = append(tOff, run(off))
			tOn = append(tOn, run(on))
		}
	}
	slices.Sort(tOff)
	slices.Sort(tOn)
	mOff, mOn := tOff[len(tOff)/2], tOn[len(tOn)/2]
	b.ReportMetric(float64(mOff.Nanoseconds())/perRound, "ns/req-off")
	b.ReportMetric(float64(mOn.Nanoseconds())/perRound, "ns/req-on")
	b.ReportMetric(float64(mOff)/float64(mOn), "on/off")
}

// instant is a requestClock that always tells the same time.
type instant time.Time

func (t instant) Time() time.Time { return time.Time(t) }
