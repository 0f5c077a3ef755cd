package peer

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	"github.com/linkforge/linkforge/internal/uses"
)

// keySecret is the peer key's Secret holding key, previous (nil: none),
// generation gen and window ("": the default).
func keySecret(key, previous *Key, gen int64, window string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secretName.Namespace, Name: secretName.Name,
		Annotations: map[string]string{GenerationAnnotation: strconv.FormatInt(gen, 10)}},
		Data: map[string][]byte{SecretKeyField: key.secret}}
	if previous != nil {
		s.Data[SecretPreviousField] = previous.secret
	}
	if window != "" {
		s.Annotations[WindowAnnotation] = window
	}
	return s
}

// loaded is a keyring on clk that has loaded each Secret in turn.
func loaded(t *testing.T, clk *netClock, secrets ...*corev1.Secret) *Keyring {
	t.Helper()
	k := NewKeyring(nil, secretName, logr.Discard(), nil)
	k.clock = clk.now
	for _, s := range secrets {
		if err := k.load(s); err != nil {
			t.Fatal(err)
		}
	}
	return k
}

// A rotation, phase by phase, over the real protocol: each replica loads
// the new key at its own moment, and a forward between any two of them is
// served as long as they load it within SignDelay of each other; past the
// window, the previous key opens nothing. Without the sign delay (the
// mutant that signs with a new key at once), "the forwarder loaded it
// first" fails; without the previous key accepted, "the holder loaded it
// first" fails.
func TestRotationPhases(t *testing.T) {
	clk := &netClock{t: time.Unix(1_800_000_000, 0)}
	old, fresh := testKey(t), testKey(t)
	before := keySecret(old, nil, 1, "")
	after := keySecret(fresh, old, 2, "")
	revoked := keySecret(fresh, nil, 2, "0s")
	type phase struct {
		name             string
		holder, forwards *Keyring
		advance          time.Duration // after both loaded what they load
		want             uses.Forwarded
	}
	for _, tc := range []phase{
		{"neither loaded it", loaded(t, clk, before), loaded(t, clk, before), 0, uses.ForwardServed},
		{"the holder loaded it first", loaded(t, clk, before, after), loaded(t, clk, before), 0, uses.ForwardServed},
		{"the forwarder loaded it first", loaded(t, clk, before), loaded(t, clk, before, after), 0, uses.ForwardServed},
		{"the holder loaded it, and the sign delay passed", loaded(t, clk, before, after), loaded(t, clk, before), SignDelay, uses.ForwardServed},
		{"both loaded it, past the sign delay", loaded(t, clk, before, after), loaded(t, clk, before, after), SignDelay, uses.ForwardServed},
		{"a replica started after the rotation, and one that has not loaded it", loaded(t, clk, after), loaded(t, clk, before), 0, uses.ForwardServed},
		// The bounds: a forwarder that loaded the new key SignDelay before
		// the holder does, and the previous key past its window.
		{"the forwarder loaded it a sign delay before the holder", loaded(t, clk, before), loaded(t, clk, before, after), SignDelay, uses.Lost},
		{"past the window, a replica that never loaded it", loaded(t, clk, before, after), loaded(t, clk, before), DefaultPreviousKeyWindow, uses.Lost},
		{"a key rotated with no window: refused at once", loaded(t, clk, before, revoked), loaded(t, clk, before), 0, uses.Lost},
	} {
		t.Run(tc.name, func(t *testing.T) {
			q := &quota{n: 1}
			addr := serve(t, q, ServerOptions{Keyring: tc.holder, Holder: "a"})
			c := NewClient(ClientOptions{Keyring: tc.forwards, AllowLocal: true, Log: logr.Discard()})
			clk.advance(tc.advance)
			defer clk.advance(-tc.advance)
			got := c.TakeFrom(withDeadline(t), uses.Holder{Name: "a", Peer: addr}, link)
			if got != tc.want {
				t.Fatalf("forward: %v, want %v", got, tc.want)
			}
			if (got == uses.ForwardServed) != (q.takenSoFar() == 1) {
				t.Fatalf("%d taken for a forward that read %v", q.takenSoFar(), got)
			}
		})
	}
}

// The keyring follows its Secret through a watch: a rotation (Rotate, the
// CLI's), the Secret deleted (the key kept) and re-created by the manager
// (loaded like a rotation, the key held before accepted in its window),
// and the metrics say which key each replica holds.
func TestKeyringFollowsItsSecret(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(newScheme()).Build()
	creator := &KeyCreator{Client: c, Secret: secretName, Log: logr.Discard()}
	if !creator.ensure(context.Background(), false) {
		t.Fatal("no Secret")
	}
	reg := prometheus.NewRegistry()
	k := NewKeyring(c, secretName, logr.Discard(), reg)
	clk := &netClock{t: time.Now()}
	k.clock = clk.now
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- k.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})

	current := func() *Key {
		if s := k.keys.Load(); s != nil {
			return s.current
		}
		return nil
	}
	// within is a bound of this test's own: a watch event on a fake API
	// server in the same process, allowed 10 s on a busy machine.
	within := func(what string, ok func() bool) {
		t.Helper()
		deadline := time.Now().Add(10 * time.Second)
		for !ok() {
			if time.Now().After(deadline) {
				t.Fatalf("not within 10s: %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	within("the first key", func() bool { return current() != nil })
	first := current()
	s := &corev1.Secret{}
	if err := c.Get(ctx, secretName, s); err != nil {
		t.Fatal(err)
	}
	gen1, _ := strconv.ParseInt(s.Annotations[GenerationAnnotation], 10, 64)
	if got := testutil.ToFloat64(k.generation); got != float64(gen1) || gen1 == 0 {
		t.Errorf("generation metric %v, want the Secret's %d", got, gen1)
	}

	gen2, err := Rotate(ctx, c, secretName, DefaultPreviousKeyWindow, time.Now())
	if err != nil || gen2 <= gen1 {
		t.Fatalf("rotate: generation %d after %d, %v", gen2, gen1, err)
	}
	within("the rotated key", func() bool { return !current().equal(first) })
	rotated := current()
	if !k.Key().equal(first) {
		t.Error("signs with the new key before the sign delay")
	}
	if key, _ := k.verifying(func(x *Key) bool { return x.equal(first) }); key == nil {
		t.Error("refuses the previous key within its window")
	}
	clk.advance(SignDelay)
	if !k.Key().equal(rotated) {
		t.Error("still signs with the previous key after the sign delay")
	}
	if got := testutil.ToFloat64(k.generation); got != float64(gen2) {
		t.Errorf("generation metric %v after the rotation, want %d", got, gen2)
	}
	if got := testutil.ToFloat64(k.info.WithLabelValues(rotated.Fingerprint())); got != 1 {
		t.Errorf("info{fingerprint=%s} = %v", rotated.Fingerprint(), got)
	}
	if n := testutil.CollectAndCount(k.info); n != 1 {
		t.Errorf("%d key fingerprints exported, want the one held", n)
	}

	// Deleted: the key is kept; re-created by the manager: loaded.
	if err := c.Delete(ctx, keySecret(rotated, nil, 0, "")); err != nil {
		t.Fatal(err)
	}
	if !creator.ensure(ctx, true) {
		t.Fatal("the manager did not re-create the Secret")
	}
	within("the re-created key", func() bool { return !current().equal(rotated) })
	if key, _ := k.verifying(func(x *Key) bool { return x.equal(rotated) }); key == nil || !k.Key().equal(rotated) {
		t.Error("the key held before the Secret was re-created is not accepted and signed with for the window")
	}
	clk.advance(DefaultPreviousKeyWindow)
	if key, _ := k.verifying(func(x *Key) bool { return x.equal(rotated) }); key != nil {
		t.Error("the key held before is accepted past the window")
	}
}

// Rotate refuses what it cannot rotate, and a window of 0 leaves no
// previous key in the Secret.
func TestRotate(t *testing.T) {
	ctx := context.Background()
	var c client.Client = fake.NewClientBuilder().WithScheme(newScheme()).Build()
	if _, err := Rotate(ctx, c, secretName, time.Minute, time.Now()); err == nil {
		t.Error("rotated a Secret that does not exist")
	}
	c = fake.NewClientBuilder().WithScheme(newScheme()).WithObjects(keySecret(testKey(t), nil, 5, "")).Build()
	if _, err := Rotate(ctx, c, secretName, -time.Second, time.Now()); err == nil {
		t.Error("a negative window")
	}
	gen, err := Rotate(ctx, c, secretName, 0, time.Unix(3, 0))
	if err != nil || gen != 6 {
		t.Fatalf("generation %d, %v; want 6 (the one before + 1, past a clock behind it)", gen, err)
	}
	s := &corev1.Secret{}
	if err := c.Get(ctx, secretName, s); err != nil {
		t.Fatal(err)
	}
	if _, ok := s.Data[SecretPreviousField]; ok || s.Annotations[WindowAnnotation] != "0s" {
		t.Errorf("a rotation with no window: %v %v", s.Annotations, len(s.Data))
	}
}
