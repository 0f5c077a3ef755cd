package peer

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"
)

var secretName = types.NamespacedName{Namespace: "linkforge-system", Name: "linkforge-peer-key"}

func newScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = corev1.AddToScheme(s)
	return s
}

// A replica that may create the Secret (an admin's kubeconfig) creates it;
// the others read the same key.
func TestKeyringCreatesThenShares(t *testing.T) {
	c := fake.NewClientBuilder().WithScheme(newScheme()).Build()
	first, second := NewKeyring(c, secretName, logr.Discard(), nil), NewKeyring(c, secretName, logr.Discard(), nil)
	for _, k := range []*Keyring{first, second} {
		if _, err := k.refresh(context.Background()); err != nil || k.Key() == nil {
			t.Fatalf("no key: %v", err)
		}
	}
	if string(first.Key().secret) != string(second.Key().secret) || len(first.Key().secret) != KeySize {
		t.Fatal("the replicas hold different keys")
	}
	s := &corev1.Secret{}
	if err := c.Get(context.Background(), secretName, s); err != nil || s.Type != corev1.SecretTypeOpaque {
		t.Fatalf("the Secret: %v %v", err, s.Type)
	}
}

// Two replicas starting at once: the one whose create loses reads the
// winner's key.
func TestKeyringLosesTheRace(t *testing.T) {
	winner := RandomKey()
	base := fake.NewClientBuilder().WithScheme(newScheme()).Build()
	c := interceptor.NewClient(base, interceptor.Funcs{
		Create: func(ctx context.Context, cl client.WithWatch, obj client.Object, opts ...client.CreateOption) error {
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secretName.Namespace, Name: secretName.Name}, Data: map[string][]byte{SecretKeyField: winner}}
			if err := cl.Create(ctx, s); err != nil {
				return err
			}
			return apierrors.NewAlreadyExists(schema.GroupResource{Resource: "secrets"}, secretName.Name)
		},
	})
	k := NewKeyring(c, secretName, logr.Discard(), nil)
	_, err := k.refresh(context.Background())
	if key := k.Key(); err != nil || key == nil || string(key.secret) != string(winner) {
		t.Fatalf("%v: not the winner's key", err)
	}
}

// A Secret with a short key is refused with a message that says why, and
// an API server that fails is retried until ctx ends.
func TestKeyringRefusesAShortKey(t *testing.T) {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: secretName.Namespace, Name: secretName.Name}, Data: map[string][]byte{SecretKeyField: []byte("short")}}
	c := fake.NewClientBuilder().WithScheme(newScheme()).WithObjects(s).Build()
	if _, err := NewKeyring(c, secretName, logr.Discard(), nil).refresh(context.Background()); err == nil || !strings.Contains(err.Error(), "holds 5 bytes, want at least 32") {
		t.Fatalf("a short key: %v", err)
	}
	failing := interceptor.NewClient(fake.NewClientBuilder().WithScheme(newScheme()).Build(), interceptor.Funcs{
		Get: func(context.Context, client.WithWatch, client.ObjectKey, client.Object, ...client.GetOption) error {
			return errors.New("connection refused")
		},
	})
	k := NewKeyring(failing, secretName, logr.Discard(), nil)
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := k.Start(ctx); err != nil || k.Key() != nil {
		t.Fatalf("a failing API server: %v, key %v", err, k.Key())
	}
}

// A replica that may not create the Secret waits for the manager's;
// a Secret of another type under the key's name (a ServiceAccount token
// someone had minted there) is not taken for a key.
func TestKeyringWaitsForTheManager(t *testing.T) {
	base := fake.NewClientBuilder().WithScheme(newScheme()).Build()
	forbidden := interceptor.NewClient(base, interceptor.Funcs{
		Create: func(context.Context, client.WithWatch, client.Object, ...client.CreateOption) error {
			return apierrors.NewForbidden(schema.GroupResource{Resource: "secrets"}, secretName.Name, errors.New("no"))
		},
	})
	k := NewKeyring(forbidden, secretName, logr.Discard(), nil)
	if _, err := k.refresh(context.Background()); !errors.Is(err, errNotCreatedYet) {
		t.Fatalf("before the manager: %v, want errNotCreatedYet", err)
	}
	creator := &KeyCreator{Client: base, Secret: secretName, Log: logr.Discard()}
	if !creator.ensure(context.Background(), false) || !creator.ensure(context.Background(), true) { // again: kept
		t.Fatal("the manager did not create the key")
	}
	if _, err := k.refresh(context.Background()); err != nil || k.Key() == nil {
		t.Fatalf("after the manager: %v", err)
	}

	token := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "other", Name: secretName.Name}, Type: corev1.SecretTypeServiceAccountToken,
		Data: map[string][]byte{SecretKeyField: RandomKey()}}
	c := fake.NewClientBuilder().WithScheme(newScheme()).WithObjects(token).Build()
	if _, err := NewKeyring(c, types.NamespacedName{Namespace: "other", Name: secretName.Name}, logr.Discard(), nil).refresh(context.Background()); err == nil || !strings.Contains(err.Error(), "not Opaque") {
		t.Errorf("a token Secret: %v, want refused", err)
	}
}
