package peer

import (
	"context"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SecretKeyField is the field of the Secret that holds the peer key.
const SecretKeyField = "key"

// Keyring holds the installation's peer key, read from (or, by the first
// replica, written to) a Secret in the redirectors' namespace: nothing for
// a user to create, and no key material in a manifest. Until it is read,
// this replica neither forwards nor serves peers (clicks reserve through
// the API server instead).
//
// To rotate the key, delete the Secret and restart the redirectors: until
// all of them have restarted, a replica with the old key and one with the
// new refuse each other, which costs reservations, never a use.
type Keyring struct {
	key    atomic.Pointer[Key]
	client client.Client
	secret types.NamespacedName
	log    logr.Logger
}

// NewKeyring reads the key from secret with c (an uncached client; the
// manager's cache holds no Secrets).
func NewKeyring(c client.Client, secret types.NamespacedName, log logr.Logger) *Keyring {
	return &Keyring{client: c, secret: secret, log: log}
}

// StaticKeyring holds key (tests).
func StaticKeyring(key *Key) *Keyring {
	k := &Keyring{}
	k.key.Store(key)
	return k
}

// Key is the peer key, or nil until it is read.
func (k *Keyring) Key() *Key { return k.key.Load() }

// NeedLeaderElection is false: every replica needs the key.
func (*Keyring) NeedLeaderElection() bool { return false }

// Start reads the key, retrying with backoff (up to 30 s apart) until it
// has it or ctx ends. It is a manager Runnable.
func (k *Keyring) Start(ctx context.Context) error {
	if k.Key() != nil {
		return nil
	}
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 1 << 30, Cap: 30 * time.Second}
	_ = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		key, err := k.load(ctx)
		if err != nil {
			k.log.Info("cannot read the peer key yet: clicks of other replicas' quota reserve through the API server", "secret", k.secret.String(), "error", err.Error())
			return false, nil
		}
		k.key.Store(key)
		k.log.V(1).Info("peer key read", "secret", k.secret.String())
		return true, nil
	})
	return nil
}

// load reads the Secret, creating it with a random key if there is none.
func (k *Keyring) load(ctx context.Context) (*Key, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for attempt := 0; attempt < 2; attempt++ {
		s := &corev1.Secret{}
		err := k.client.Get(ctx, k.secret, s)
		if err == nil {
			key, ok := NewKey(s.Data[SecretKeyField])
			if !ok {
				return nil, fmt.Errorf("secret %s: field %q holds %d bytes, want at least %d", k.secret, SecretKeyField, len(s.Data[SecretKeyField]), KeySize)
			}
			return key, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
		s = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Namespace: k.secret.Namespace, Name: k.secret.Name,
				Labels: map[string]string{"app.kubernetes.io/name": "linkforge", "app.kubernetes.io/component": "redirector"}},
			Type: corev1.SecretTypeOpaque,
			Data: map[string][]byte{SecretKeyField: RandomKey()},
		}
		err = k.client.Create(ctx, s)
		if err == nil {
			k.log.Info("created the peer key", "secret", k.secret.String())
			key, _ := NewKey(s.Data[SecretKeyField])
			return key, nil
		}
		if !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
		// Another replica created it first: read theirs.
	}
	return nil, fmt.Errorf("secret %s was created and deleted again meanwhile", k.secret)
}
