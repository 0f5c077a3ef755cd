package peer

import (
	"context"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// SecretKeyField is the field of the Secret that holds the peer key.
const SecretKeyField = "key"

// Keyring holds the installation's peer key, read from a Secret in the
// redirectors' namespace that the manager creates (KeyCreator): nothing for
// a user to create, and no key material in a manifest. The redirector may
// get that one Secret and create none, so that a compromised redirector
// cannot mint a Secret it could read (a ServiceAccount token under the
// key's name). Where it may create it (a single process with an admin's
// kubeconfig), it creates it itself. Until it is read, this replica neither
// forwards nor serves peers (clicks reserve through the API server
// instead).
//
// To rotate the key, delete the Secret and restart the manager, then the
// redirectors: until
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
		switch {
		case apierrors.IsForbidden(err):
			k.log.Info("the peer key does not exist yet; waiting for the manager to create it (clicks of other replicas' quota reserve through the API server)", "secret", k.secret.String())
			return false, nil
		case err != nil:
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
			if s.Type != corev1.SecretTypeOpaque && s.Type != "" { // "": Opaque, as the API server defaults it
				return nil, fmt.Errorf("secret %s is of type %q, not Opaque: not a peer key", k.secret, s.Type)
			}
			key, ok := NewKey(s.Data[SecretKeyField])
			if !ok {
				return nil, fmt.Errorf("secret %s: field %q holds %d bytes, want at least %d", k.secret, SecretKeyField, len(s.Data[SecretKeyField]), KeySize)
			}
			return key, nil
		}
		if !apierrors.IsNotFound(err) {
			return nil, err
		}
		s = newKeySecret(k.secret)
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

// appName and component name the redirector in labels and metrics.
const (
	appName   = "linkforge"
	component = "redirector"
)

// newKeySecret is a new Secret holding a random peer key.
func newKeySecret(name types.NamespacedName) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: name.Namespace, Name: name.Name,
			Labels: map[string]string{"app.kubernetes.io/name": appName, "app.kubernetes.io/component": component}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{SecretKeyField: RandomKey()},
	}
}

// KeyCreator creates the peer key's Secret if there is none: the manager
// runs it, with the right to create Secrets in its namespace and not to
// read them. It is a manager Runnable that retries until the Secret exists.
type KeyCreator struct {
	Client client.Client
	Secret types.NamespacedName
	Log    logr.Logger
}

// NeedLeaderElection is false: any manager replica may create it first.
func (*KeyCreator) NeedLeaderElection() bool { return false }

// Start creates the Secret (an existing one is kept as it is), retrying
// with backoff until it exists or ctx ends.
func (kc *KeyCreator) Start(ctx context.Context) error {
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 1 << 30, Cap: 30 * time.Second}
	_ = wait.ExponentialBackoffWithContext(ctx, backoff, func(ctx context.Context) (bool, error) {
		cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		err := kc.Client.Create(cctx, newKeySecret(kc.Secret))
		switch {
		case err == nil:
			kc.Log.Info("created the redirectors' peer key", "secret", kc.Secret.String())
		case apierrors.IsAlreadyExists(err):
		default:
			kc.Log.Info("cannot create the redirectors' peer key yet", "secret", kc.Secret.String(), "error", err.Error())
			return false, nil
		}
		return true, nil
	})
	return nil
}

// DefaultNamespace is where the peer key lives when no flag says: the
// pod's namespace ($POD_NAMESPACE), else the namespace of the kubeconfig's
// context (in a pod: its service account's; kubectl's rule).
func DefaultNamespace(kubeconfig string) (string, error) {
	if ns := os.Getenv("POD_NAMESPACE"); ns != "" {
		return ns, nil
	}
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	rules.ExplicitPath = kubeconfig
	ns, _, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, nil).Namespace()
	return ns, err
}
