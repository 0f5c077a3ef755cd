package main

import "testing"

func TestShortName(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"k8s.io/client-go/tools/cache.(*threadSafeMap).updateLocked", "cache.(*threadSafeMap).updateLocked"},
		{"github.com/linkforge/linkforge/internal/redirect.NewLink", "redirect.NewLink"},
		{"reflect.unsafe_New", "reflect.unsafe_New"},
		{"k8s.io/apimachinery/pkg/util/sets.Set[go.shape.string].Insert", "sets.Set[…].Insert"},
		{"sigs.k8s.io/controller-runtime/pkg/controller/priorityqueue.(*priorityqueue[go.shape.struct { k8s.io/apimachinery/pkg/types.NamespacedName }]).add",
			"priorityqueue.(*priorityqueue[…]).add"},
	} {
		if got := shortName(tc.in); got != tc.want {
			t.Errorf("shortName(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

// An allocation belongs to the innermost frame that an owner names, so
// that the strings a decoder makes for the redirector's Links are the
// Links' strings, not the informer's that called the decoder.
func TestOwnerOf(t *testing.T) {
	for _, tc := range []struct {
		name  string
		funcs []string // innermost first
		want  string
	}{
		{"a Link", []string{"github.com/linkforge/linkforge/internal/redirect.NewLink", "github.com/linkforge/linkforge/internal/redirect.TransformShortLink", "k8s.io/client-go/tools/cache.(*sharedIndexInformer).HandleDeltas"},
			"Link (the index entry), linkMore"},
		{"a decoded string under the informer", []string{"github.com/go-json-experiment/json.makeString", "github.com/linkforge/linkforge/internal/redirect.decodeLinkList", "k8s.io/client-go/tools/cache.(*Reflector).list"},
			"link strings kept from the decoded object (name, uid, resourceVersion, code, url)"},
		{"a counter", []string{"github.com/linkforge/linkforge/internal/uses.(*Uses).Attach", "github.com/linkforge/linkforge/internal/redirect.(*Redirector).attachUses"},
			"use counters (uses.Counter, split counts)"},
		{"the store's map", []string{"k8s.io/client-go/tools/cache.(*threadSafeMap).updateLocked"}, "informer store (keys, map)"},
		{"nobody's", []string{"regexp.(*bitState).reset", "main.main"}, ""},
	} {
		if got := ownerOf(tc.funcs, redirectorOwners); got != tc.want {
			t.Errorf("%s: owner %q, want %q", tc.name, got, tc.want)
		}
	}
}

func TestPerLinkSites(t *testing.T) {
	b := &bench{n: 100}
	full := map[string]float64{"a": 30000, "b": 10000, "c": 5000, "d": 200, "gone": 0}
	idle := map[string]float64{"a": 10000, "d": 200, "gone": 1000}
	sum, sites := b.perLinkSites(full, idle)
	if sum != 340 || sites != "a 200; b 100; c 50" {
		t.Errorf("per link %v (%s), want 340 (a 200; b 100; c 50)", sum, sites)
	}
}
