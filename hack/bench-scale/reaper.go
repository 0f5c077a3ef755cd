package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

// The reaper's measurement: 10% of N finished at once, against a floor.

func (b *bench) reaper(ctx context.Context) error {
	m := max(1, b.n/10)
	step("reaper: %d links falling due at once", m)
	if err := b.namespace(ctx, "reap"); err != nil {
		return err
	}
	allReady, stopWatch, err := b.watchLinks(ctx, "reap", m, isReady)
	if err != nil {
		return err
	}
	// Expiring a while after they are created and Ready, and due for
	// deletion a while after the controller has marked them: each wait is
	// twice the time the first N took, scaled to m, and 30s more.
	t0 := time.Now()
	est := time.Duration(2*float64(b.conv)*float64(m)/float64(b.n)) + 30*time.Second
	expiry := metav1.NewTime(time.Now().Add(est).Truncate(time.Second))
	ttl := int32(est.Seconds())
	due := expiry.Add(time.Duration(ttl) * time.Second)
	if err := b.parallel(m, func(i int) error {
		l := b.link("reap", i)
		l.Spec.ExpiresAt = &expiry
		l.Spec.TTLSecondsAfterFinished = ptr.To(ttl)
		return b.c.Create(ctx, l)
	}); err != nil {
		return err
	}
	select {
	case <-allReady:
	case <-time.After(time.Until(expiry.Time)):
	}
	stopWatch()
	if time.Now().After(expiry.Time) {
		return fmt.Errorf("the %d reap links were not Ready %s after their creation, before they expired", m, time.Since(t0).Round(time.Second))
	}
	allFinished, stopWatch, err := b.watchLinks(ctx, "reap", m, isFinished)
	if err != nil {
		return err
	}
	select {
	case <-allFinished:
	case <-time.After(time.Until(due)):
	}
	stopWatch()
	if time.Now().After(due) {
		return fmt.Errorf("the %d reap links were not all marked finished before they fell due", m)
	}
	time.Sleep(time.Until(due))
	gone, err := b.waitGone(ctx, "reap", 30*time.Minute)
	if err != nil {
		return err
	}
	b.row("reaper: N/10 due at once, until all deleted", "%d links in %.1fs (%.0f/s; default --reap-rate and --reap-workers), load %s", m, gone.Seconds(), float64(m)/gone.Seconds(), loadavg())

	step("reaper floor: %d deletes with preconditions by %d plain clients", m, b.clients)
	if err := b.namespace(ctx, "reapfloor"); err != nil {
		return err
	}
	// Created and reconciled before the clock starts, so the manager is as
	// idle as it is when the reaper's links fall due.
	allReady, stopWatch, err = b.watchLinks(ctx, "reapfloor", m, isReady)
	if err != nil {
		return err
	}
	links := make([]*linkv1.ShortLink, m)
	if err := b.parallel(m, func(i int) error {
		links[i] = b.link("reapfloor", i)
		return b.c.Create(ctx, links[i])
	}); err != nil {
		return err
	}
	select {
	case <-allReady:
	case <-time.After(30 * time.Minute):
		stopWatch()
		return errors.New("the reaper floor's links did not become Ready")
	}
	stopWatch()
	start := time.Now()
	if err := b.parallel(m, func(i int) error {
		l := links[i]
		return client.IgnoreNotFound(b.c.Delete(ctx, l, client.Preconditions{UID: &l.UID}))
	}); err != nil {
		return err
	}
	fl := time.Since(start)
	b.row("reaper floor: N/10 deletes (plain client)", "%.1fs (%.0f/s); reaper/floor %.2f", fl.Seconds(), float64(m)/fl.Seconds(), gone.Seconds()/fl.Seconds())
	return nil
}

// saveHeapProfile saves the heap profile of the binary whose pprof
// endpoints are at addr (after a GC, as /debug/pprof/heap?gc=1 does).
