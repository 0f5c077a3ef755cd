package controllers

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	metav1ac "k8s.io/client-go/applyconfigurations/meta/v1"
	"k8s.io/client-go/tools/events"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwapply "sigs.k8s.io/gateway-api/applyconfiguration/apis/v1"

	"github.com/linkforge/linkforge/internal/claim"
)

// GatewayHostsFieldManager is the field manager of the manager's
// server-side applies to the Gateway and its HTTPRoutes: it owns its
// listeners, and only those (listeners is a map keyed by name).
const GatewayHostsFieldManager = "linkforge-gateway-hosts"

// ManagedByLabel marks the HTTPRoutes the manager keeps; the cache watches
// only those.
const (
	ManagedByLabel = "app.kubernetes.io/managed-by"
	ManagedByValue = "linkforge-manager"
)

// certificateGVK is cert-manager's Certificate, read as unstructured: the
// manager does not depend on cert-manager's module.
var certificateGVK = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}

// GatewayHostsOptions configure the Gateway hosts controller (--gateway and
// the flags beside it).
type GatewayHostsOptions struct {
	// Gateway is the one Gateway whose listeners the manager keeps.
	Gateway types.NamespacedName
	// SecretTemplate names each host's certificate Secret in the Gateway's
	// namespace; {host} is the host with dots as dashes.
	SecretTemplate string
	// Redirector is the redirector's Service; its namespace holds the
	// HTTPRoutes.
	Redirector types.NamespacedName
	// RedirectorPort is the Service's port the routes send to.
	RedirectorPort int32
	// ListenerPort is the listeners' port (443).
	ListenerPort int32
	// Recheck is how often the conditions of a host that is not served yet
	// are read again (the Certificate is read, not watched). 0: a minute.
	Recheck time.Duration
}

// ParseGatewayRef parses a --gateway or --gateway-redirector-service value,
// <namespace>/<name>.
func ParseGatewayRef(flag, s string) (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return types.NamespacedName{}, fmt.Errorf("%s %q: want <namespace>/<name>", flag, s)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

// Check says what is wrong with the options.
func (o *GatewayHostsOptions) Check() error {
	if o.Gateway.Name == "" || o.Redirector.Name == "" {
		return errors.New("the Gateway and the redirector's Service are both needed")
	}
	if o.RedirectorPort < 1 || o.RedirectorPort > 65535 {
		return fmt.Errorf("--gateway-redirector-port %d is not a port", o.RedirectorPort)
	}
	if o.ListenerPort < 1 || o.ListenerPort > 65535 {
		return fmt.Errorf("--gateway-listener-port %d is not a port", o.ListenerPort)
	}
	return checkSecretTemplate(o.SecretTemplate)
}

// GatewayHostsCacheOptions limits what the cache holds of the Gateway API
// to what the controller may read: the one Gateway (a field selector on
// its name: RBAC's resourceNames allow a list and watch of it alone), and
// the HTTPRoutes it keeps in the redirector's namespace.
func GatewayHostsCacheOptions(opts *cache.Options, o GatewayHostsOptions) {
	if opts.ByObject == nil {
		opts.ByObject = map[client.Object]cache.ByObject{}
	}
	opts.ByObject[&gatewayv1.Gateway{}] = cache.ByObject{Namespaces: map[string]cache.Config{
		o.Gateway.Namespace: {FieldSelector: fields.OneTermEqualSelector("metadata.name", o.Gateway.Name)},
	}}
	opts.ByObject[&gatewayv1.HTTPRoute{}] = cache.ByObject{Namespaces: map[string]cache.Config{
		o.Redirector.Namespace: {LabelSelector: labels.SelectorFromSet(labels.Set{ManagedByLabel: ManagedByValue})},
	}}
}

var gatewayHostGauge = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Namespace: "linkforge", Subsystem: "manager", Name: "gateway_host",
	Help: "Each host a namespace claims with linkforge.io/domain, by condition: Listener 1 if the host has its listener on the --gateway, " +
		"0 if not (refused: conflict, invalid host, listener limit; or no Gateway); Accepted, Programmed, CertificateReady 1 True, 0 False, -1 Unknown.",
}, []string{"host", namespaceLabel, "condition"})

// namespaceLabel is the label of a namespace's series.
const namespaceLabel = "namespace"

func init() { metrics.Registry.MustRegister(gatewayHostGauge) }

// GatewayHostsReconciler keeps, on one Gateway, an HTTPS listener for every
// host a namespace claims with linkforge.io/domain (the namespace the
// redirector serves it from: the older claim wins, claim.DomainWinners),
// and an HTTPRoute from that listener to the redirector; it removes both
// when the claim goes. It writes the Gateway with a server-side apply of
// its own listeners (GatewayHostsFieldManager): the user's listeners, and
// every other field, stay as they are. cert-manager's gateway-shim issues
// each listener's certificate from the Gateway's annotations: the manager
// never reads a Secret. Each host's state (Accepted, Programmed,
// CertificateReady) goes to an event on its Namespace when it changes, and
// to linkforge_manager_gateway_host.
//
// Every change reconciles the one Gateway: a Namespace's claim, the
// Gateway, one of the HTTPRoutes.
type GatewayHostsReconciler struct {
	Client   client.Client
	Recorder events.EventRecorder
	Options  GatewayHostsOptions

	mu sync.Mutex
	// said is the last event of each namespace/host, so that each is sent
	// once per change; gauges the series set, so that gone hosts lose theirs.
	said   map[string]string
	gauges map[[2]string]bool
}

// SetupWithManager registers the controller. The manager's cache must hold
// Gateways and HTTPRoutes as GatewayHostsCacheOptions says.
func (r *GatewayHostsReconciler) SetupWithManager(mgr ctrl.Manager) error {
	if err := r.Options.Check(); err != nil {
		return err
	}
	if r.Options.Recheck <= 0 {
		r.Options.Recheck = time.Minute
	}
	r.said, r.gauges = map[string]string{}, map[[2]string]bool{}
	key := []reconcile.Request{{NamespacedName: r.Options.Gateway}}
	all := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request { return key })
	return ctrl.NewControllerManagedBy(mgr).
		Named("gatewayhosts").
		WatchesRawSource(source.Kind(mgr.GetCache(), client.Object(&corev1.Namespace{}), all, claimChanged)).
		WatchesRawSource(source.Kind(mgr.GetCache(), client.Object(&gatewayv1.Gateway{}), all)).
		WatchesRawSource(source.Kind(mgr.GetCache(), client.Object(&gatewayv1.HTTPRoute{}), all)).
		Complete(r)
}

// claimChanged passes the Namespace events that can change a claim: one
// with linkforge.io/domain appears or goes, or its annotation changes (the
// other namespaces' updates, labels say, do not reconcile the Gateway).
var claimChanged = predicate.Funcs{
	CreateFunc: func(e event.CreateEvent) bool { return e.Object.GetAnnotations()[claim.DomainAnnotation] != "" },
	DeleteFunc: func(e event.DeleteEvent) bool { return e.Object.GetAnnotations()[claim.DomainAnnotation] != "" },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return e.ObjectOld.GetAnnotations()[claim.DomainAnnotation] != e.ObjectNew.GetAnnotations()[claim.DomainAnnotation]
	},
	GenericFunc: func(event.GenericEvent) bool { return true },
}

// Reconcile brings the Gateway's listeners and the HTTPRoutes in line with
// the claims, then reports each host's state.
func (r *GatewayHostsReconciler) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	logger := log.FromContext(ctx)
	var nss corev1.NamespaceList
	if err := r.Client.List(ctx, &nss); err != nil {
		return reconcile.Result{}, err
	}
	claims := map[string]claim.Domain{}
	byName := map[string]*corev1.Namespace{}
	for i := range nss.Items {
		ns := &nss.Items[i]
		if host := claim.NormalizeHost(ns.Annotations[claim.DomainAnnotation]); host != "" {
			claims[ns.Name] = claim.Domain{Host: host, Created: ns.CreationTimestamp.Time}
			byName[ns.Name] = ns
		}
	}
	gwName := r.Options.Gateway.String()
	var gw gatewayv1.Gateway
	if err := r.Client.Get(ctx, r.Options.Gateway, &gw); err != nil {
		if !apierrors.IsNotFound(err) {
			return reconcile.Result{}, err
		}
		logger.Info("the Gateway of --gateway does not exist: no host is programmed until it does", "gateway", gwName, "claims", len(claims))
		seen := map[[2]string]bool{}
		for ns, c := range claims {
			seen[[2]string{c.Host, ns}] = true
			unlisted(c.Host, ns)
			r.say(byName[ns], c.Host, corev1.EventTypeWarning, ReasonGatewayMissing,
				fmt.Sprintf("host %q gets no listener: Gateway %s (the manager's --gateway) does not exist; it is programmed once the Gateway is created", c.Host, gwName))
		}
		r.forget(seen)
		return reconcile.Result{}, nil
	}
	user := 0
	for i := range gw.Spec.Listeners {
		if !strings.HasPrefix(string(gw.Spec.Listeners[i].Name), GatewayObjectPrefix) {
			user++
		}
	}
	hosts, refused := planGatewayHosts(claims, GatewayListenerLimit-user, r.Options.SecretTemplate)
	if err := r.applyListeners(ctx, hosts); err != nil {
		return reconcile.Result{}, fmt.Errorf("applying the listeners of Gateway %s: %w", gwName, err)
	}
	routes, err := r.applyRoutes(ctx, hosts)
	if err != nil {
		return reconcile.Result{}, err
	}

	seen := map[[2]string]bool{}
	for _, h := range refused {
		seen[[2]string{h.Host, h.Namespace}] = true
		unlisted(h.Host, h.Namespace)
		r.say(byName[h.Namespace], h.Host, corev1.EventTypeWarning, h.Reason, h.Message)
	}
	recheck := false
	for _, h := range hosts {
		seen[[2]string{h.Host, h.Namespace}] = true
		cert, err := r.certificate(ctx, h.Secret)
		if err != nil {
			return reconcile.Result{}, err
		}
		conds := hostConditions(&gw, routes[h.Listener], h, cert)
		gatewayHostGauge.WithLabelValues(h.Host, h.Namespace, HostConditionListener).Set(1)
		for _, c := range conds {
			gatewayHostGauge.WithLabelValues(h.Host, h.Namespace, c.Type).Set(conditionValue(c.Status))
			recheck = recheck || c.Status != metav1.ConditionTrue
		}
		t, reason, msg := hostEvent(h, gwName, conds)
		r.say(byName[h.Namespace], h.Host, t, reason, msg)
	}
	r.forget(seen)
	if recheck {
		return reconcile.Result{RequeueAfter: r.Options.Recheck}, nil
	}
	return reconcile.Result{}, nil
}

// applyListeners applies the listeners of hosts to the Gateway as
// GatewayHostsFieldManager: listeners it applied before and not now are
// removed, the others' are untouched.
func (r *GatewayHostsReconciler) applyListeners(ctx context.Context, hosts []gatewayHost) error {
	o := &r.Options
	apply := gwapply.Gateway(o.Gateway.Name, o.Gateway.Namespace)
	if len(hosts) > 0 {
		spec := gwapply.GatewaySpec()
		for _, h := range hosts {
			spec.WithListeners(gwapply.Listener().
				WithName(gatewayv1.SectionName(h.Listener)).
				WithHostname(gatewayv1.Hostname(h.Host)).
				WithPort(o.ListenerPort).
				WithProtocol(gatewayv1.HTTPSProtocolType).
				WithTLS(gwapply.ListenerTLSConfig().
					WithMode(gatewayv1.TLSModeTerminate).
					WithCertificateRefs(gwapply.SecretObjectReference().WithName(gatewayv1.ObjectName(h.Secret)))).
				WithAllowedRoutes(gwapply.AllowedRoutes().WithNamespaces(gwapply.RouteNamespaces().
					WithFrom(gatewayv1.NamespacesFromSelector).
					WithSelector(metav1ac.LabelSelector().WithMatchLabels(map[string]string{corev1.LabelMetadataName: o.Redirector.Namespace})))))
		}
		apply.WithSpec(spec)
	}
	return r.Client.Apply(ctx, apply, client.FieldOwner(GatewayHostsFieldManager), client.ForceOwnership)
}

// applyRoutes applies an HTTPRoute for each host and deletes the routes of
// hosts gone; it returns the routes the cache holds, by name.
func (r *GatewayHostsReconciler) applyRoutes(ctx context.Context, hosts []gatewayHost) (map[string]*gatewayv1.HTTPRoute, error) {
	o := &r.Options
	var list gatewayv1.HTTPRouteList
	if err := r.Client.List(ctx, &list, client.InNamespace(o.Redirector.Namespace), client.MatchingLabels{ManagedByLabel: ManagedByValue}); err != nil {
		return nil, err
	}
	have := make(map[string]*gatewayv1.HTTPRoute, len(list.Items))
	for i := range list.Items {
		have[list.Items[i].Name] = &list.Items[i]
	}
	want := make(map[string]bool, len(hosts))
	for _, h := range hosts {
		want[h.Listener] = true
		route := gwapply.HTTPRoute(h.Listener, o.Redirector.Namespace).
			WithLabels(map[string]string{ManagedByLabel: ManagedByValue}).
			WithAnnotations(map[string]string{claim.DomainAnnotation: h.Host, "linkforge.io/namespace": h.Namespace}).
			WithSpec(gwapply.HTTPRouteSpec().
				WithParentRefs(gwapply.ParentReference().
					WithGroup(gatewayv1.GroupName).WithKind("Gateway").
					WithNamespace(gatewayv1.Namespace(o.Gateway.Namespace)).WithName(gatewayv1.ObjectName(o.Gateway.Name)).
					WithSectionName(gatewayv1.SectionName(h.Listener))).
				WithHostnames(gatewayv1.Hostname(h.Host)).
				WithRules(gwapply.HTTPRouteRule().WithBackendRefs(gwapply.HTTPBackendRef().
					WithName(gatewayv1.ObjectName(o.Redirector.Name)).WithPort(o.RedirectorPort))))
		if err := r.Client.Apply(ctx, route, client.FieldOwner(GatewayHostsFieldManager), client.ForceOwnership); err != nil {
			return nil, fmt.Errorf("applying HTTPRoute %s/%s: %w", o.Redirector.Namespace, h.Listener, err)
		}
	}
	for name, route := range have {
		if want[name] {
			continue
		}
		if err := r.Client.Delete(ctx, route, client.Preconditions{UID: &route.UID}); client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("deleting HTTPRoute %s/%s: %w", route.Namespace, name, err)
		}
		delete(have, name)
	}
	return have, nil
}

// certificate reads the cert-manager Certificate named name in the
// Gateway's namespace, from the API server (one Get: the manager does not
// watch Certificates). No cert-manager is not an error.
func (r *GatewayHostsReconciler) certificate(ctx context.Context, name string) (certificateState, error) {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(certificateGVK)
	err := r.Client.Get(ctx, types.NamespacedName{Namespace: r.Options.Gateway.Namespace, Name: name}, u)
	switch {
	case err == nil:
		return certificateState{API: true, Cert: u}, nil
	case meta.IsNoMatchError(err) || discoveryMissing(err):
		return certificateState{}, nil
	case apierrors.IsNotFound(err):
		return certificateState{API: true}, nil
	}
	return certificateState{}, fmt.Errorf("reading Certificate %s/%s: %w", r.Options.Gateway.Namespace, name, err)
}

// discoveryMissing says whether err means the API group is not served
// (a 404 for the resource itself, before any object is looked up).
func discoveryMissing(err error) bool {
	var status apierrors.APIStatus
	return errors.As(err, &status) && status.Status().Details != nil && status.Status().Details.Name == "" && apierrors.IsNotFound(err)
}

// unlisted sets the series of a claimed host without a listener: Listener
// 0, and no other condition.
func unlisted(host, ns string) {
	gatewayHostGauge.WithLabelValues(host, ns, HostConditionListener).Set(0)
	for _, c := range []string{HostConditionAccepted, HostConditionProgrammed, HostConditionCertificateReady} {
		gatewayHostGauge.DeleteLabelValues(host, ns, c)
	}
}

// say sends ns an event about host, unless it is the last one sent.
func (r *GatewayHostsReconciler) say(ns *corev1.Namespace, host, eventType, reason, message string) {
	if ns == nil {
		return
	}
	k := ns.Name + "/" + host
	v := eventType + "/" + reason + "/" + message
	r.mu.Lock()
	same := r.said[k] == v
	r.said[k] = v
	r.mu.Unlock()
	if same || r.Recorder == nil {
		return
	}
	r.Recorder.Eventf(ns, nil, eventType, reason, "ProgramGatewayHost", "%s", message)
}

// forget drops the series and the last event of the hosts that are no longer
// claimed (not in seen).
func (r *GatewayHostsReconciler) forget(seen map[[2]string]bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for k := range r.gauges {
		if !seen[k] {
			for _, c := range []string{HostConditionListener, HostConditionAccepted, HostConditionProgrammed, HostConditionCertificateReady} {
				gatewayHostGauge.DeleteLabelValues(k[0], k[1], c)
			}
			delete(r.said, k[1]+"/"+k[0])
		}
	}
	r.gauges = seen
}
