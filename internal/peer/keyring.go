package peer

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// The peer key's Secret: its fields and annotations.
const (
	// SecretKeyField holds the key the replicas sign with.
	SecretKeyField = "key"
	// SecretPreviousField holds the key before the last rotation, which
	// the replicas still accept for the rotation's window.
	SecretPreviousField = "previous"
	// GenerationAnnotation is the key's generation: the Unix time (s) it
	// was made, and higher than the one before it.
	GenerationAnnotation = "linkforge.io/peer-key-generation"
	// WindowAnnotation is how long after they load the key the replicas
	// accept the previous one (a Go duration; DefaultPreviousKeyWindow
	// when absent or invalid).
	WindowAnnotation = "linkforge.io/peer-key-previous-window"
)

const (
	// DefaultPreviousKeyWindow is how long each replica accepts the key
	// before a rotation after it loads the new one: long past the time
	// every replica needs to load it (a watch event), short enough that a
	// key rotated because it leaked stops opening the port soon (rotate
	// with a window of 0 to drop it at once).
	DefaultPreviousKeyWindow = 10 * time.Minute
	// SignDelay is how long after it loads a new key a replica still
	// signs with the one before, so that every replica accepts the new
	// key before any signs with it: a rotation costs no forward as long
	// as the replicas load it within SignDelay of each other.
	SignDelay = 30 * time.Second
	// KeepInterval is how often the manager makes sure the Secret exists
	// (KeyCreator): a deleted key is back within it.
	KeepInterval = 10 * time.Second
	// watchTimeout ends each watch of the Secret, after which it is read
	// again: a missed event is caught within it.
	watchTimeout = 5 * time.Minute
)

// Keyring holds the installation's peer key, read from a Secret in the
// redirectors' namespace that the manager creates and keeps (KeyCreator):
// nothing for a user to create, and no key material in a manifest. The
// redirector may read and watch that one Secret and create none, so that
// a compromised redirector cannot mint a Secret it could read (a
// ServiceAccount token under the key's name). Where it may create it (a
// single process with an admin's kubeconfig), it creates it itself. Until
// it is read, this replica neither forwards nor serves peers: its clicks
// ask through the API server (uses.NoKey).
//
// It watches the Secret and loads a new key without a restart. A rotation
// (Rotate; kubectl linkforge rotate-peer-key) keeps the key before it in
// the Secret's previous field; each replica, from the moment it loads
// the new key, accepts both for the rotation's window and signs with the
// previous one for SignDelay more, so that a replica slower to load the
// new key is not refused meanwhile. A deleted Secret changes nothing here:
// the replica keeps its key until the manager's new one arrives, which it
// loads like a rotation (the old key, kept in memory, is the previous one).
type Keyring struct {
	keys   atomic.Pointer[keySet]
	client client.WithWatch
	secret types.NamespacedName
	log    logr.Logger
	clock  func() time.Time

	generation prometheus.Gauge
	info       *prometheus.GaugeVec
	loads      prometheus.Counter
}

// keySet is what a replica holds at one moment.
type keySet struct {
	current *Key
	// previous are the keys accepted until previousUntil (the Secret's
	// previous field, and the key this replica held before current), and
	// signWith the one it signs with until signUntil.
	previous      []*Key
	previousUntil time.Time
	signWith      *Key
	signUntil     time.Time
	generation    int64
}

// signing is the key to sign with at now.
func (s *keySet) signing(now time.Time) *Key {
	if s.signWith != nil && now.Before(s.signUntil) {
		return s.signWith
	}
	return s.current
}

// NewKeyring reads and watches secret with c (its own client: the
// manager's cache holds no Secrets) and registers its metrics with reg
// (nil: none).
func NewKeyring(c client.WithWatch, secret types.NamespacedName, log logr.Logger, reg prometheus.Registerer) *Keyring {
	k := &Keyring{client: c, secret: secret, log: log, clock: time.Now,
		generation: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: metricsNamespace, Subsystem: metricsSubsystem,
			Name: "peer_key_generation",
			Help: "The generation of the peer key this replica holds (the Secret's " + GenerationAnnotation + ", the Unix time the key was made); 0 until it has one. Replicas that differ for longer than a watch event are split: see docs/operations.md."}),
		info: prometheus.NewGaugeVec(prometheus.GaugeOpts{Namespace: metricsNamespace, Subsystem: metricsSubsystem,
			Name: "peer_key_info",
			Help: "1 for the peer key this replica holds, labelled with its fingerprint (the first 8 hex digits of its SHA-256): replicas with another fingerprint cannot forward to this one."},
			[]string{"fingerprint"}),
		loads: prometheus.NewCounter(prometheus.CounterOpts{Namespace: metricsNamespace, Subsystem: metricsSubsystem,
			Name: "peer_key_loads_total",
			Help: "Peer keys this replica has loaded: the first, then one per rotation or re-created Secret."}),
	}
	if reg != nil {
		reg.MustRegister(k.generation, k.info, k.loads)
	}
	return k
}

// StaticKeyring holds key (tests).
func StaticKeyring(key *Key) *Keyring {
	k := &Keyring{clock: time.Now}
	k.keys.Store(&keySet{current: key})
	return k
}

// Key is the key to sign with now, or nil until one is read.
func (k *Keyring) Key() *Key {
	s := k.keys.Load()
	if s == nil {
		return nil
	}
	return s.signing(k.clock())
}

// verifying returns the key under which ok holds, among those this
// replica accepts now: nil if none does, and whether it has a key at all.
func (k *Keyring) verifying(ok func(*Key) bool) (key *Key, has bool) {
	s := k.keys.Load()
	if s == nil {
		return nil, false
	}
	if ok(s.current) {
		return s.current, true
	}
	if len(s.previous) > 0 && k.clock().Before(s.previousUntil) {
		for _, p := range s.previous {
			if ok(p) {
				return p, true
			}
		}
	}
	return nil, true
}

// NeedLeaderElection is false: every replica needs the key.
func (*Keyring) NeedLeaderElection() bool { return false }

// Start reads the key and watches it until ctx ends, retrying with backoff
// (up to 30 s apart) whatever fails. It is a manager Runnable.
func (k *Keyring) Start(ctx context.Context) error {
	if k.client == nil {
		return nil // static
	}
	backoff := wait.Backoff{Duration: 500 * time.Millisecond, Factor: 2, Jitter: 0.2, Steps: 1 << 30, Cap: 30 * time.Second}
	for ctx.Err() == nil {
		began := time.Now()
		rv, err := k.refresh(ctx)
		if err == nil {
			err = k.watch(ctx, rv)
		}
		switch {
		case ctx.Err() != nil:
			return nil
		case errors.Is(err, errNotCreatedYet):
			k.log.Info("the peer key does not exist yet: waiting for the manager to create it (clicks of other replicas' quota ask through the API server)",
				"secret", k.secret.String())
		case err != nil:
			k.log.Info("cannot read the peer key yet: clicks of other replicas' quota ask through the API server", "secret", k.secret.String(), "error", err.Error())
		}
		if time.Since(began) > 2*backoff.Cap {
			backoff.Duration, backoff.Steps = 500*time.Millisecond, 1<<30 // it ran well: start over
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(backoff.Step()):
		}
	}
	return nil
}

// errNotCreatedYet: there is no Secret, and this replica may not create it.
var errNotCreatedYet = errors.New("the peer key's Secret does not exist yet")

// refresh reads the Secret (creating it if there is none and this replica
// may) and loads its key; it returns the resourceVersion to watch from.
func (k *Keyring) refresh(ctx context.Context) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	for attempt := 0; attempt < 2; attempt++ {
		s := &corev1.Secret{}
		err := k.client.Get(ctx, k.secret, s)
		if err == nil {
			return s.ResourceVersion, k.load(s)
		}
		if !apierrors.IsNotFound(err) {
			return "", err
		}
		if k.keys.Load() != nil {
			// Deleted while this replica held a key: it keeps it until
			// the manager re-creates the Secret.
			return "", nil
		}
		s = newKeySecret(k.secret, k.clock())
		err = k.client.Create(ctx, s)
		if err == nil {
			k.log.Info("created the peer key", "secret", k.secret.String())
			return s.ResourceVersion, k.load(s)
		}
		if apierrors.IsForbidden(err) {
			return "", errNotCreatedYet // the manager creates it (this replica may not)
		}
		if !apierrors.IsAlreadyExists(err) {
			return "", err
		}
		// Another replica created it first: read theirs.
	}
	return "", fmt.Errorf("secret %s was created and deleted again meanwhile", k.secret)
}

// watch loads every version of the Secret from resourceVersion rv on,
// until the watch ends (watchTimeout, an error, ctx).
func (k *Keyring) watch(ctx context.Context, rv string) error {
	w, err := k.client.Watch(ctx, &corev1.SecretList{}, client.InNamespace(k.secret.Namespace),
		client.MatchingFieldsSelector{Selector: fields.OneTermEqualSelector("metadata.name", k.secret.Name)},
		&client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: rv, TimeoutSeconds: ptrTo(int64(watchTimeout / time.Second))}})
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case ev, ok := <-w.ResultChan():
			if !ok {
				return nil
			}
			switch ev.Type {
			case watch.Error:
				return apierrors.FromObject(ev.Object)
			case watch.Added, watch.Modified:
				if s, ok := ev.Object.(*corev1.Secret); ok && s.Name == k.secret.Name {
					if err := k.load(s); err != nil {
						k.log.Error(err, "the peer key's Secret changed to one that holds no key: keeping the key this replica has", "secret", k.secret.String())
					}
				}
			case watch.Deleted:
				if s, ok := ev.Object.(*corev1.Secret); ok && s.Name == k.secret.Name {
					k.log.Info("the peer key's Secret was deleted: keeping the key this replica has until the manager re-creates it", "secret", k.secret.String())
				}
			}
		}
	}
}

func ptrTo[T any](v T) *T { return &v }

// load takes the key of s, if it is not the one held already.
func (k *Keyring) load(s *corev1.Secret) error {
	cur, prev, gen, window, err := parseKeySecret(s)
	if err != nil {
		return err
	}
	now := k.clock()
	old := k.keys.Load()
	next := &keySet{current: cur, generation: gen}
	if old != nil && old.current.equal(cur) {
		if old.generation == gen {
			return nil
		}
		kept := *old // the same key: a new generation number alone
		kept.generation = gen
		k.keys.Store(&kept)
		k.generation.Set(float64(gen))
		return nil
	}
	if window > 0 {
		next.previous = appendKey(next.previous, cur, prev)
		if old != nil {
			// The keys this replica signed with and held: the others
			// may not have loaded the new one yet.
			next.previous = appendKey(next.previous, cur, old.signing(now))
			next.previous = appendKey(next.previous, cur, old.current)
			next.signWith, next.signUntil = old.signing(now), now.Add(min(SignDelay, window))
		}
		next.previousUntil = now.Add(window)
	}
	k.keys.Store(next)
	k.loads.Inc()
	k.generation.Set(float64(gen))
	k.info.Reset()
	k.info.WithLabelValues(cur.Fingerprint()).Set(1)
	if old == nil {
		k.log.Info("loaded the peer key", "secret", k.secret.String(), "generation", gen, "fingerprint", cur.Fingerprint())
	} else {
		k.log.Info("loaded a new peer key: accepting the previous one for its window, signing with the new one after the sign delay",
			"secret", k.secret.String(), "generation", gen, "fingerprint", cur.Fingerprint(), "previousWindow", window.String(), "signDelay", min(SignDelay, window).String())
	}
	return nil
}

// appendKey appends p to keys unless it is nil, cur or already there.
func appendKey(keys []*Key, cur, p *Key) []*Key {
	if p == nil || p.equal(cur) {
		return keys
	}
	for _, k := range keys {
		if k.equal(p) {
			return keys
		}
	}
	return append(keys, p)
}

// parseKeySecret reads a peer key's Secret: its key, the previous one (nil:
// none), the generation and the window.
func parseKeySecret(s *corev1.Secret) (cur, prev *Key, gen int64, window time.Duration, err error) {
	name := s.Namespace + "/" + s.Name
	if s.Type != corev1.SecretTypeOpaque && s.Type != "" { // "": Opaque, as the API server defaults it
		return nil, nil, 0, 0, fmt.Errorf("secret %s is of type %q, not Opaque: not a peer key", name, s.Type)
	}
	cur, ok := NewKey(s.Data[SecretKeyField])
	if !ok {
		return nil, nil, 0, 0, fmt.Errorf("secret %s: field %q holds %d bytes, want at least %d", name, SecretKeyField, len(s.Data[SecretKeyField]), KeySize)
	}
	if p, ok := s.Data[SecretPreviousField]; ok {
		if prev, ok = NewKey(p); !ok {
			return nil, nil, 0, 0, fmt.Errorf("secret %s: field %q holds %d bytes, want at least %d", name, SecretPreviousField, len(p), KeySize)
		}
	}
	gen, _ = strconv.ParseInt(s.Annotations[GenerationAnnotation], 10, 64) // 0: a Secret made by hand
	window = DefaultPreviousKeyWindow
	if w, err := time.ParseDuration(s.Annotations[WindowAnnotation]); err == nil && w >= 0 {
		window = w
	}
	return cur, prev, gen, window, nil
}

// Fingerprint names the key without revealing it: the first 8 hex digits
// of its SHA-256.
func (k *Key) Fingerprint() string {
	sum := sha256.Sum256(k.secret)
	return hex.EncodeToString(sum[:4])
}

func (k *Key) equal(o *Key) bool {
	return k != nil && o != nil && bytes.Equal(k.secret, o.secret)
}

// appName and component name the redirector in labels and metrics.
const (
	appName   = "linkforge"
	component = "redirector"
)

// newKeySecret is a new Secret holding a random peer key made at now.
func newKeySecret(name types.NamespacedName, now time.Time) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: name.Namespace, Name: name.Name,
			Labels:      map[string]string{"app.kubernetes.io/name": appName, "app.kubernetes.io/component": component},
			Annotations: map[string]string{GenerationAnnotation: strconv.FormatInt(now.Unix(), 10)}},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{SecretKeyField: RandomKey()},
	}
}

// KeyCreator creates the peer key's Secret if there is none, and again
// whenever it is deleted: the manager runs it, with the right to create
// Secrets in its namespace and not to read them, so it tries a create
// every KeepInterval (an existing Secret refuses it, and is kept as it
// is). It is a manager Runnable.
type KeyCreator struct {
	Client client.Client
	Secret types.NamespacedName
	Log    logr.Logger
	// Interval is how often it tries (default KeepInterval).
	Interval time.Duration
}

// NeedLeaderElection is false: any manager replica may create it first.
func (*KeyCreator) NeedLeaderElection() bool { return false }

// Start keeps the Secret in place until ctx ends.
func (kc *KeyCreator) Start(ctx context.Context) error {
	interval := kc.Interval
	if interval <= 0 {
		interval = KeepInterval
	}
	existed := false
	for {
		existed = kc.ensure(ctx, existed)
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait.Jitter(interval, 0.2)):
		}
	}
}

// ensure creates the Secret if it is missing, and says whether it exists.
func (kc *KeyCreator) ensure(ctx context.Context, existed bool) bool {
	cctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	err := kc.Client.Create(cctx, newKeySecret(kc.Secret, time.Now()))
	switch {
	case err == nil && existed:
		kc.Log.Info("re-created the redirectors' peer key: it had been deleted; the redirectors load the new key without a restart", "secret", kc.Secret.String())
	case err == nil:
		kc.Log.Info("created the redirectors' peer key", "secret", kc.Secret.String())
	case apierrors.IsAlreadyExists(err):
	case ctx.Err() != nil:
		return existed
	default:
		kc.Log.Info("cannot create the redirectors' peer key yet", "secret", kc.Secret.String(), "error", err.Error())
		return existed
	}
	return true
}

// Rotate replaces the peer key in secret with a new random one, keeping
// the one before in its previous field, which the replicas accept for
// window after they load the new key (0: not at all, for a key that
// leaked). It is an update at the Secret's resourceVersion: two rotations
// at once do not both win. It returns the new generation.
func Rotate(ctx context.Context, c client.Client, secret types.NamespacedName, window time.Duration, now time.Time) (int64, error) {
	if window < 0 {
		return 0, errors.New("the previous key's window cannot be negative")
	}
	s := &corev1.Secret{}
	if err := c.Get(ctx, secret, s); err != nil {
		return 0, err
	}
	if _, _, _, _, err := parseKeySecret(s); err != nil {
		return 0, err
	}
	gen, _ := strconv.ParseInt(s.Annotations[GenerationAnnotation], 10, 64)
	gen = max(gen+1, now.Unix())
	if s.Annotations == nil {
		s.Annotations = map[string]string{}
	}
	s.Annotations[GenerationAnnotation] = strconv.FormatInt(gen, 10)
	s.Annotations[WindowAnnotation] = window.String()
	s.Data = map[string][]byte{SecretKeyField: RandomKey(), SecretPreviousField: s.Data[SecretKeyField]}
	if window == 0 {
		delete(s.Data, SecretPreviousField)
	}
	if err := c.Update(ctx, s); err != nil {
		return 0, err
	}
	return gen, nil
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
