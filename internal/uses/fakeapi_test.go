package uses

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync"
	"time"

	"golang.org/x/time/rate"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

// fakeAPI is an API server holding one ShortLink, with the semantics the
// uses writes rely on (resourceVersion preconditions on merge patches of
// the status) and faults to inject per holder.
type fakeAPI struct {
	mu    sync.Mutex
	link  *linkv1.ShortLink // nil: deleted
	rv    int
	fault map[string]fault // by holder
	// patches are the bodies of the status patches applied, in order.
	patches []string
	// lowered is set when a patch wrote a status.uses below the one before.
	lowered bool
	// lastUsedBack is set when a patch moved status.lastUsedAt back.
	lastUsedBack bool
	// gets counts the live reads of the link.
	gets int
	// frozenWaits counts the requests that met a frozen API server.
	frozenWaits int
	// takenBack is the quota of reservations that a patch of another
	// holder removed: counted as used, since their holders may have served it.
	takenBack int64
	// races is, by holder, how many of its next patches lose a race: another
	// replica's write lands between its read and its patch.
	races map[string]int
	// split are the destinations of the link's split (LinkVersion.SplitURLs).
	split []string
}

// fault is what the next request of a holder meets.
type fault int

const (
	noFault fault = iota
	// paused: every request times out at once (the API server does not
	// answer), deterministically.
	paused
	// applyThenTimeout: the next patch is applied, and its response lost.
	applyThenTimeout
	// timeoutBeforeApply: the next patch is lost before it is applied.
	timeoutBeforeApply
	// frozen: every request waits for its context to end (a stopped API
	// server, as the client sees it).
	frozen
)

var linkGR = schema.GroupResource{Group: "linkforge.io", Resource: "shortlinks"}

func newFakeAPI(maxUses int64) *fakeAPI {
	a := &fakeAPI{fault: map[string]fault{}, races: map[string]int{}}
	a.create("uid-1", maxUses)
	return a
}

// uid is the UIDKey of the link's current object.
func (a *fakeAPI) uid() uint64 {
	return UIDKey(a.get().UID)
}

// create makes the link anew under its name with uid.
func (a *fakeAPI) create(uid string, maxUses int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rv++
	a.link = &linkv1.ShortLink{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "l", UID: types.UID(uid), ResourceVersion: strconv.Itoa(a.rv)}}
	if maxUses > 0 {
		a.link.Spec.MaxUses = &maxUses
	}
}

// setMaxUses changes the spec, as kubectl patch would.
func (a *fakeAPI) setMaxUses(n int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.rv++
	a.link.Spec.MaxUses = &n
	a.link.ResourceVersion = strconv.Itoa(a.rv)
}

func (a *fakeAPI) get() *linkv1.ShortLink {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.link == nil {
		return nil
	}
	return a.link.DeepCopy()
}

// version is the link as an informer would show it.
func (a *fakeAPI) version() Versioned {
	l := a.get()
	v := &testVersion{LinkVersion{Namespace: l.Namespace, Name: l.Name, ResourceVersion: l.ResourceVersion,
		UID: UIDKey(l.UID), StatusUses: l.Status.Uses, NoReservations: len(l.Status.UseReservations) == 0,
		VariantUses: l.Status.VariantUses}}
	a.mu.Lock()
	v.SplitURLs = a.split
	a.mu.Unlock()
	if l.Status.LastUsedAt != nil {
		v.StatusLastUsed = l.Status.LastUsedAt.Unix()
	}
	if l.Spec.MaxUses != nil {
		v.MaxUses = *l.Spec.MaxUses
	}
	// The redirector's rule (forwardTo): the reservation with the most
	// quota, none asked to return.
	var most int64
	for _, res := range l.Status.UseReservations {
		if res.PeerAddress != "" && !res.ReturnRequested && (v.Peer.Peer == "" || res.Quota > most) {
			v.Peer, most = Holder{Name: res.Holder, Peer: res.PeerAddress}, res.Quota
		}
		v.ReturnRequested = v.ReturnRequested || res.ReturnRequested
	}
	return v
}

// loseRaces makes the holder's next n patches conflict, as when the other
// replicas write the link between each read and patch of the holder's.
func (a *fakeAPI) loseRaces(holder string, n int) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.races[holder] = n
}

// raceLost lands another replica's write (of nothing the tests read) before
// the holder's patch if it is to lose a race. a.mu is held.
func (a *fakeAPI) raceLost(holder string) {
	if a.races[holder] > 0 {
		a.races[holder]--
		a.rv++
		a.link.ResourceVersion = strconv.Itoa(a.rv)
	}
}

func (a *fakeAPI) setFault(holder string, f fault) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.fault[holder] = f
}

// takeFault returns the holder's fault; one-shot faults are used up.
func (a *fakeAPI) takeFault(holder string, patch bool) fault {
	a.mu.Lock()
	defer a.mu.Unlock()
	f := a.fault[holder]
	lasting := f == paused || f == frozen
	if !lasting && patch {
		delete(a.fault, holder)
	}
	if !lasting && !patch {
		return noFault
	}
	return f
}

func (a *fakeAPI) frozenWait() {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.frozenWaits++
}

func (a *fakeAPI) frozenWaitCount() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.frozenWaits
}

type testVersion struct{ LinkVersion }

func (v *testVersion) UsesVersion() LinkVersion { return v.LinkVersion }

// fakeClient is one replica's client of a fakeAPI.
type fakeClient struct {
	client.Client // nil: any other call panics
	api           *fakeAPI
	holder        string
}

func (c *fakeClient) Get(ctx context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	switch c.api.takeFault(c.holder, false) {
	case paused:
		return context.DeadlineExceeded
	case frozen:
		c.api.frozenWait()
		<-ctx.Done()
		return ctx.Err()
	}
	c.api.mu.Lock()
	c.api.gets++
	c.api.mu.Unlock()
	l := c.api.get()
	if l == nil || key.Name != l.Name || key.Namespace != l.Namespace {
		return apierrors.NewNotFound(linkGR, key.Name)
	}
	*obj.(*linkv1.ShortLink) = *l
	return nil
}

func (c *fakeClient) Status() client.SubResourceWriter { return &fakeStatus{c: c} }

type fakeStatus struct {
	client.SubResourceWriter // nil: Update and the others panic
	c                        *fakeClient
}

func (s *fakeStatus) Patch(ctx context.Context, obj client.Object, patch client.Patch, _ ...client.SubResourcePatchOption) error {
	f := s.c.api.takeFault(s.c.holder, true)
	switch f {
	case paused, timeoutBeforeApply:
		return context.DeadlineExceeded
	case frozen:
		s.c.api.frozenWait()
		<-ctx.Done()
		return ctx.Err()
	}
	switch f {
	case timeoutBeforeApply:
		return context.DeadlineExceeded
	}
	if patch.Type() != types.MergePatchType {
		return fmt.Errorf("patch type %s, want a merge patch", patch.Type())
	}
	body, err := patch.Data(obj)
	if err != nil {
		return err
	}
	var p struct {
		Metadata map[string]json.RawMessage `json:"metadata"`
		Status   map[string]json.RawMessage `json:"status"`
	}
	if err := json.Unmarshal(body, &p); err != nil {
		return err
	}
	for k := range p.Metadata {
		if k != "resourceVersion" {
			return fmt.Errorf("patch sets metadata.%s", k)
		}
	}
	a := s.c.api
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.link == nil || a.link.Name != obj.GetName() {
		return apierrors.NewNotFound(linkGR, obj.GetName())
	}
	var rv string
	if err := json.Unmarshal(p.Metadata["resourceVersion"], &rv); err != nil || rv == "" {
		return fmt.Errorf("a status patch without a resourceVersion precondition: %s", body)
	}
	a.raceLost(s.c.holder)
	if rv != a.link.ResourceVersion {
		return apierrors.NewConflict(linkGR, obj.GetName(), fmt.Errorf("resourceVersion %s, want %s", a.link.ResourceVersion, rv))
	}
	before := a.link.Status.UseReservations
	for k, v := range p.Status {
		switch k {
		case "uses":
			before := a.link.Status.Uses
			if err := json.Unmarshal(v, &a.link.Status.Uses); err != nil {
				return err
			}
			if a.link.Status.Uses < before {
				a.lowered = true
			}
		case "lastUsedAt":
			if err := a.setLastUsed(v); err != nil {
				return err
			}
		case "useReservations":
			a.link.Status.UseReservations = nil
			if err := json.Unmarshal(v, &a.link.Status.UseReservations); err != nil {
				return err
			}
		case "variantUses":
			a.link.Status.VariantUses = nil
			if err := json.Unmarshal(v, &a.link.Status.VariantUses); err != nil {
				return err
			}
		default:
			return fmt.Errorf("patch sets status.%s", k)
		}
	}
	for _, old := range before {
		kept := false
		for _, res := range a.link.Status.UseReservations {
			kept = kept || res.Holder == old.Holder
		}
		if !kept && old.Holder != s.c.holder {
			a.takenBack += old.Quota
		}
	}
	a.rv++
	a.link.ResourceVersion = strconv.Itoa(a.rv)
	a.patches = append(a.patches, string(body))
	if f == applyThenTimeout {
		return context.DeadlineExceeded
	}
	return nil
}

// setLastUsed applies a patch's status.lastUsedAt, noting a move back.
// a.mu is held.
func (a *fakeAPI) setLastUsed(v json.RawMessage) error {
	before := a.link.Status.LastUsedAt
	a.link.Status.LastUsedAt = nil
	if err := json.Unmarshal(v, &a.link.Status.LastUsedAt); err != nil {
		return err
	}
	if before != nil && (a.link.Status.LastUsedAt == nil || a.link.Status.LastUsedAt.Before(before)) {
		a.lastUsedBack = true
	}
	return nil
}

// fakeClock is a clock the test moves; each replica reads it with its own skew.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

func (c *fakeClock) skewed(skew time.Duration) func() time.Time {
	return func() time.Time {
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.now.Add(skew)
	}
}

// testReplica is one redirector's counting of the fake API's link.
type testReplica struct {
	u       *Uses
	c       *Counter
	api     *fakeAPI
	holder  string
	clock   func() time.Time
	dead    bool
	ctx     context.Context
	flushes int
	// short: the property test's replicas, whose API never blocks.
	short bool
	// created is the link's creationTimestamp its informer shows (Unix s).
	created int64
	// retired are the counters of objects deleted since (a new uid).
	retired []*Counter
}

// wait bounds a request's wait for quota, and a flush round.
func (r *testReplica) wait() time.Duration {
	if r.short {
		return time.Minute // only what the test injects fails
	}
	return 50 * time.Millisecond
}

// starve spends r's write budget until heal: every write finds none.
func (r *testReplica) starve() {
	for _, l := range []*rate.Limiter{r.u.budget, r.u.pace} {
		l.SetLimit(0)
		l.SetBurst(0)
	}
}

func (r *testReplica) heal() {
	r.u.budget.SetLimit(rate.Limit(r.u.opts.WritesPerSecond))
	r.u.budget.SetBurst(r.u.opts.ReserveBurst)
	r.u.pace.SetLimit(rate.Limit(r.u.opts.WritesPerSecond))
	r.u.pace.SetBurst(1)
}

func newTestReplica(api *fakeAPI, clk *fakeClock, holder string, skew time.Duration, short ...bool) *testReplica {
	r := &testReplica{api: api, holder: holder, clock: clk.skewed(skew), ctx: context.Background(), short: len(short) > 0 && short[0]}
	r.u = New(Options{
		Client: &fakeClient{api: api, holder: holder}, Holder: holder, Peer: holder,
		FlushInterval: 10 * time.Second, Lease: 30 * time.Second, WritesPerSecond: 1e9,
		ReserveTimeout: r.wait(), MaxBlock: 8, Clock: r.clock,
	})
	r.sync()
	return r
}

// sync delivers the link's current version, as the informer does.
func (r *testReplica) sync() {
	if l := r.api.get(); l != nil {
		v := r.api.version().(*testVersion)
		v.Created = r.created
		c := r.u.Attach(r.c, v)
		if r.c != nil && c != r.c {
			r.retired = append(r.retired, r.c) // another object: its counter lingers until written
		}
		r.c = c
	}
}

func (r *testReplica) take() Verdict { return r.u.Take(r.c, r.clock()) }

// flush runs a flush round; a paused API server holds each write 50ms.
func (r *testReplica) flush(final bool) {
	r.flushes++
	ctx, cancel := context.WithTimeout(r.ctx, r.wait())
	defer cancel()
	r.u.Flush(ctx, final)
}
