package controllers

import (
	"errors"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/logr/funcr"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
)

// countingSink counts the WithValues calls that reach the sink it wraps.
type countingSink struct {
	logr.LogSink
	withValues *int
}

func (c countingSink) WithValues(kv ...any) logr.LogSink {
	*c.withValues++
	return countingSink{c.LogSink.WithValues(kv...), c.withValues}
}

func (c countingSink) WithCallDepth(depth int) logr.LogSink {
	return countingSink{c.LogSink.(logr.CallDepthLogSink).WithCallDepth(depth), c.withValues}
}

func TestReconcileLoggerDefersValues(t *testing.T) {
	var lines []string
	var withValues int
	inner := funcr.New(func(prefix, args string) { lines = append(lines, prefix+" "+args) },
		funcr.Options{Verbosity: 1, LogCaller: funcr.All})
	// WithSink, not logr.New: inner's sink is initialized already.
	mgrLog := inner.WithSink(countingSink{inner.GetSink(), &withValues})

	construct := reconcileLogger(mgrLog, "shortlink")
	if got := construct(nil); got.GetSink() == nil {
		t.Fatal("no logger for a nil request")
	}
	atSetup := withValues

	req := &reconcile.Request{NamespacedName: types.NamespacedName{Namespace: "team", Name: "docs"}}
	log := construct(req).WithValues("reconcileID", "r1")
	sibling := construct(req).WithValues("reconcileID", "r2")
	if withValues != atSetup {
		t.Fatalf("building a request's logger reached the sink's WithValues %d times, want 0", withValues-atSetup)
	}

	log.V(2).Info("hidden")
	log.WithName("sub").Info("written", "k", "v")
	sibling.Error(errors.New("boom"), "failed")
	if len(lines) != 2 {
		t.Fatalf("got %d lines, want 2: %q", len(lines), lines)
	}
	for _, want := range []string{`"controller"="shortlink"`, `"ShortLink"={"name"="docs" "namespace"="team"}`,
		`"namespace"="team"`, `"name"="docs"`, `"reconcileID"="r1"`, `"k"="v"`, `sub`, `reconcile_logger_test.go`} {
		if !strings.Contains(lines[0], want) {
			t.Errorf("line %q lacks %s", lines[0], want)
		}
	}
	for _, want := range []string{`"reconcileID"="r2"`, `"error"="boom"`, `reconcile_logger_test.go`} {
		if !strings.Contains(lines[1], want) {
			t.Errorf("line %q lacks %s", lines[1], want)
		}
	}
	if strings.Contains(lines[1], "r1") || strings.Contains(lines[0], "r2") {
		t.Errorf("siblings share values: %q", lines)
	}
}
