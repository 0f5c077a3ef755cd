package controllers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/linkforge/linkforge/internal/claim"
)

var installGatewayCRDs sync.Once

// installCRDs installs the CRDs of testdata/<dir> into the suite's API server.
func installCRDs(dir string) {
	GinkgoHelper()
	_, err := envtest.InstallCRDs(cfg, envtest.CRDInstallOptions{Paths: []string{filepath.Join("testdata", dir)}, ErrorIfPathMissing: true})
	Expect(err).NotTo(HaveOccurred())
}

// gatewayHostsEnv is one test's Gateway, redirector namespace and manager.
type gatewayHostsEnv struct {
	gw         types.NamespacedName
	redirector string
	userHTTP   gatewayv1.Listener
}

const gatewayHostsTimeout = 30 * time.Second

// newGatewayHostsEnv starts a manager with the Gateway hosts controller for
// a Gateway of its own (created unless absent), routing to a redirector
// Service in a namespace of its own.
func newGatewayHostsEnv(userListeners int, createGateway bool) *gatewayHostsEnv {
	GinkgoHelper()
	return newGatewayHostsEnvAs(nil, userListeners, createGateway)
}

// newGatewayHostsEnvAs is newGatewayHostsEnv with the manager's client
// given by as(redirector's namespace, Gateway's namespace) (nil: admin).
func newGatewayHostsEnvAs(as func(redirector, gateway string) *rest.Config, userListeners int, createGateway bool) *gatewayHostsEnv {
	GinkgoHelper()
	installGatewayCRDs.Do(func() { installCRDs("gateway-api") })
	e := &gatewayHostsEnv{
		gw:         types.NamespacedName{Namespace: newNamespace("gw"), Name: "public"},
		redirector: newNamespace("lf"),
	}
	if createGateway {
		e.createGateway(userListeners)
	}
	opts := GatewayHostsOptions{
		Gateway: e.gw, SecretTemplate: DefaultGatewayCertificateSecret,
		Redirector: types.NamespacedName{Namespace: e.redirector, Name: "linkforge-redirector"}, RedirectorPort: 8080,
		ListenerPort: 443, Recheck: 500 * time.Millisecond,
	}
	copts := ManagerCacheOptions(nil, nil)
	GatewayHostsCacheOptions(&copts, opts)
	c := cfg
	if as != nil {
		c = as(e.redirector, e.gw.Namespace)
	}
	startManagerAs(c, ctrl.Options{Cache: copts}, func(_ context.Context, mgr ctrl.Manager) error {
		r := &GatewayHostsReconciler{Client: mgr.GetClient(), Recorder: mgr.GetEventRecorder("linkforge-manager"), Options: opts}
		return r.SetupWithManager(mgr)
	})
	return e
}

// createGateway creates the Gateway with n listeners of the user's.
func (e *gatewayHostsEnv) createGateway(n int) {
	GinkgoHelper()
	gw := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: e.gw.Namespace, Name: e.gw.Name,
		Annotations: map[string]string{"cert-manager.io/cluster-issuer": "ca"}},
		Spec: gatewayv1.GatewaySpec{GatewayClassName: "traefik"}}
	for i := range n {
		gw.Spec.Listeners = append(gw.Spec.Listeners, gatewayv1.Listener{Name: gatewayv1.SectionName(fmt.Sprintf("user-%d", i)),
			Hostname: ptr.To(gatewayv1.Hostname(fmt.Sprintf("u%d.example", i))), Port: 80, Protocol: gatewayv1.HTTPProtocolType})
	}
	Expect(k8sClient.Create(suiteCtx, gw)).To(Succeed())
	e.userHTTP = gw.Spec.Listeners[0]
}

// claimHost creates a namespace that claims host; the claim goes when the
// test ends (namespaces are never deleted in envtest).
func claimHost(prefix, host string) string {
	GinkgoHelper()
	ns := newNamespace(prefix)
	setClaim(ns, host)
	DeferCleanup(func() { setClaim(ns, "") })
	return ns
}

// setClaim sets (or, with "", removes) a namespace's linkforge.io/domain.
func setClaim(ns, host string) {
	GinkgoHelper()
	Eventually(func(g Gomega) {
		var n corev1.Namespace
		g.Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Name: ns}, &n)).To(Succeed())
		if host == "" {
			delete(n.Annotations, claim.DomainAnnotation)
		} else {
			if n.Annotations == nil {
				n.Annotations = map[string]string{}
			}
			n.Annotations[claim.DomainAnnotation] = host
		}
		g.Expect(k8sClient.Update(suiteCtx, &n)).To(Succeed())
	}).WithTimeout(gatewayHostsTimeout).Should(Succeed())
}

func (e *gatewayHostsEnv) gateway(g Gomega) *gatewayv1.Gateway {
	var gw gatewayv1.Gateway
	g.Expect(k8sClient.Get(suiteCtx, e.gw, &gw)).To(Succeed())
	return &gw
}

// ownListeners are the names of the Gateway's linkforge- listeners, sorted.
func (e *gatewayHostsEnv) ownListeners(g Gomega) []string {
	var out []string
	for _, l := range e.gateway(g).Spec.Listeners {
		if strings.HasPrefix(string(l.Name), GatewayObjectPrefix) {
			out = append(out, string(l.Name))
		}
	}
	slices.Sort(out)
	return out
}

// routes are the names of the HTTPRoutes in the redirector's namespace, sorted.
func (e *gatewayHostsEnv) routes(g Gomega) []string {
	var list gatewayv1.HTTPRouteList
	g.Expect(k8sClient.List(suiteCtx, &list, client.InNamespace(e.redirector))).To(Succeed())
	out := make([]string, 0, len(list.Items))
	for _, r := range list.Items {
		out = append(out, r.Name)
	}
	slices.Sort(out)
	return out
}

// namespaceEvents lists the events about Namespace ns as "Type Reason: note".
func namespaceEvents(g Gomega, ns string) []string {
	var list eventsv1.EventList
	g.Expect(k8sClient.List(suiteCtx, &list)).To(Succeed())
	var out []string
	for _, e := range list.Items {
		if e.Regarding.Kind == "Namespace" && e.Regarding.Name == ns {
			out = append(out, fmt.Sprintf("%s %s: %s", e.Type, e.Reason, e.Note))
		}
	}
	return out
}

// hostGauge reads linkforge_manager_gateway_host{host,namespace,condition};
// ok is false when the series does not exist.
func hostGauge(host, ns, condition string) (v float64, ok bool) {
	ch := make(chan prometheus.Metric, 1024)
	gatewayHostGauge.Collect(ch)
	close(ch)
	for m := range ch {
		var d dto.Metric
		Expect(m.Write(&d)).To(Succeed())
		labels := map[string]string{}
		for _, l := range d.Label {
			labels[l.GetName()] = l.GetValue()
		}
		if labels["host"] == host && labels["namespace"] == ns && labels["condition"] == condition {
			return d.Gauge.GetValue(), true
		}
	}
	return 0, false
}

// gaugeOf is the value of a series that must exist.
func gaugeOf(host, ns, condition string) float64 {
	GinkgoHelper()
	v, ok := hostGauge(host, ns, condition)
	Expect(ok).To(BeTrue(), "no series for %s %s %s", host, ns, condition)
	return v
}

func listenerName(host string) string { return "linkforge-" + strings.ReplaceAll(host, ".", "-") }

var _ = Describe("Gateway hosts", Ordered, func() {
	It("keeps a listener and a route for each claimed host, the older claim's, and removes them with the claim", func() {
		e := newGatewayHostsEnv(1, true)
		hostA, hostB := "a."+e.redirector+".example", "b."+e.redirector+".example"
		teamA := claimHost("team-a", hostA)
		teamB := claimHost("team-b", strings.ToUpper(hostB)+".:443") // normalized as the redirector does
		la, lb := listenerName(hostA), listenerName(hostB)
		Eventually(func(g Gomega) {
			g.Expect(e.ownListeners(g)).To(Equal([]string{la, lb}))
			g.Expect(e.routes(g)).To(Equal([]string{la, lb}))
		}).WithTimeout(gatewayHostsTimeout).Should(Succeed())

		gw := e.gateway(Default)
		Expect(gw.Spec.Listeners[0]).To(Equal(e.userHTTP), "the user's listener is kept as it was")
		Expect(gw.Annotations).To(HaveKeyWithValue("cert-manager.io/cluster-issuer", "ca"))
		i := slices.IndexFunc(gw.Spec.Listeners, func(l gatewayv1.Listener) bool { return string(l.Name) == la })
		l := gw.Spec.Listeners[i]
		Expect(*l.Hostname).To(BeEquivalentTo(hostA))
		Expect(l.Port).To(BeEquivalentTo(443))
		Expect(l.Protocol).To(Equal(gatewayv1.HTTPSProtocolType))
		Expect(*l.TLS.Mode).To(Equal(gatewayv1.TLSModeTerminate))
		Expect(l.TLS.CertificateRefs).To(HaveLen(1))
		Expect(l.TLS.CertificateRefs[0].Name).To(BeEquivalentTo(la))
		Expect(l.TLS.CertificateRefs[0].Namespace).To(BeNil(), "the Secret is in the Gateway's namespace")
		Expect(*l.AllowedRoutes.Namespaces.From).To(Equal(gatewayv1.NamespacesFromSelector))
		Expect(l.AllowedRoutes.Namespaces.Selector.MatchLabels).To(Equal(map[string]string{corev1.LabelMetadataName: e.redirector}))

		var route gatewayv1.HTTPRoute
		Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: e.redirector, Name: la}, &route)).To(Succeed())
		Expect(route.Spec.Hostnames).To(Equal([]gatewayv1.Hostname{gatewayv1.Hostname(hostA)}))
		Expect(route.Spec.ParentRefs).To(HaveLen(1))
		p := route.Spec.ParentRefs[0]
		Expect(string(p.Name)).To(Equal(e.gw.Name))
		Expect(string(*p.Namespace)).To(Equal(e.gw.Namespace))
		Expect(string(*p.SectionName)).To(Equal(la))
		Expect(route.Spec.Rules).To(HaveLen(1))
		Expect(route.Spec.Rules[0].BackendRefs).To(HaveLen(1))
		Expect(string(route.Spec.Rules[0].BackendRefs[0].Name)).To(Equal("linkforge-redirector"))
		Expect(*route.Spec.Rules[0].BackendRefs[0].Port).To(BeEquivalentTo(8080))
		Expect(route.Annotations).To(HaveKeyWithValue("linkforge.io/namespace", teamA))

		By("a second namespace claiming host A gets nothing and a Warning")
		late := claimHost("team-late", hostA)
		Eventually(func(g Gomega) []string { return namespaceEvents(g, late) }).WithTimeout(gatewayHostsTimeout).
			Should(ContainElement(And(HavePrefix("Warning "+ReasonHostConflict+": "), ContainSubstring(teamA))))
		Expect(e.ownListeners(Default)).To(Equal([]string{la, lb}))
		Expect(gaugeOf(hostA, late, HostConditionListener)).To(BeZero())

		By("without cert-manager, the certificate is Unknown, not an error")
		Eventually(func(g Gomega) []string { return namespaceEvents(g, teamB) }).WithTimeout(gatewayHostsTimeout).
			Should(ContainElement(And(HavePrefix("Normal "+ReasonHostPending+": "), ContainSubstring("NoCertManager"))))
		Expect(gaugeOf(hostB, teamB, HostConditionListener)).To(BeEquivalentTo(1))
		Expect(gaugeOf(hostB, teamB, HostConditionCertificateReady)).To(BeEquivalentTo(-1))

		By("team A's claim goes: the listener and route pass to the namespace that claimed it next")
		setClaim(teamA, "")
		Eventually(func(g Gomega) {
			var r gatewayv1.HTTPRoute
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: e.redirector, Name: la}, &r)).To(Succeed())
			g.Expect(r.Annotations).To(HaveKeyWithValue("linkforge.io/namespace", late))
		}).WithTimeout(gatewayHostsTimeout).Should(Succeed())
		Eventually(func() bool { _, ok := hostGauge(hostA, teamA, HostConditionListener); return ok }).WithTimeout(gatewayHostsTimeout).Should(BeFalse())

		By("every claim goes: no listener, no route, the user's listener as it was")
		setClaim(late, "")
		setClaim(teamB, "")
		Eventually(func(g Gomega) {
			g.Expect(e.ownListeners(g)).To(BeEmpty())
			g.Expect(e.routes(g)).To(BeEmpty())
		}).WithTimeout(gatewayHostsTimeout).Should(Succeed())
		Expect(e.gateway(Default).Spec.Listeners).To(Equal([]gatewayv1.Listener{e.userHTTP}))
	})

	It("adds no more listeners than the Gateway holds: the oldest claims win, the others get a Warning", func() {
		e := newGatewayHostsEnv(GatewayListenerLimit-2, true)
		nss, hosts := make([]string, 0, 3), make([]string, 0, 3)
		for i := range 3 {
			hosts = append(hosts, fmt.Sprintf("h%d.%s.example", i, e.redirector))
			nss = append(nss, claimHost(fmt.Sprintf("lim%d", i), hosts[i]))
		}
		// Created one after the other: by creation time, then name (both
		// ascending), the first two are the oldest claims.
		Eventually(func(g Gomega) {
			g.Expect(e.ownListeners(g)).To(Equal([]string{listenerName(hosts[0]), listenerName(hosts[1])}))
			g.Expect(namespaceEvents(g, nss[2])).To(ContainElement(And(HavePrefix("Warning "+ReasonListenerLimit+": "), ContainSubstring("at most 64"))))
		}).WithTimeout(gatewayHostsTimeout).Should(Succeed())
		Expect(e.gateway(Default).Spec.Listeners).To(HaveLen(GatewayListenerLimit))
		Expect(gaugeOf(hosts[2], nss[2], HostConditionListener)).To(BeZero())

		By("an older claim goes: the next gets its place")
		setClaim(nss[0], "")
		Eventually(e.ownListeners).WithTimeout(gatewayHostsTimeout).Should(Equal([]string{listenerName(hosts[1]), listenerName(hosts[2])}))
	})

	It("says the Gateway is missing, and programs the host once it exists", func() {
		e := newGatewayHostsEnv(1, false)
		host := "late-gw." + e.redirector + ".example"
		ns := claimHost("wait", host)
		Eventually(func(g Gomega) []string { return namespaceEvents(g, ns) }).WithTimeout(gatewayHostsTimeout).
			Should(ContainElement(And(HavePrefix("Warning "+ReasonGatewayMissing+": "), ContainSubstring(e.gw.String()))))
		Expect(gaugeOf(host, ns, HostConditionListener)).To(BeZero())
		e.createGateway(1)
		Eventually(e.ownListeners).WithTimeout(gatewayHostsTimeout).Should(Equal([]string{listenerName(host)}))
		Eventually(e.routes).WithTimeout(gatewayHostsTimeout).Should(Equal([]string{listenerName(host)}))
	})

	It("reports the Gateway's, the route's and the Certificate's conditions as events and in the metric", func() {
		installCRDs("cert-manager")
		e := newGatewayHostsEnv(1, true)
		host := "s." + e.redirector + ".example"
		ns := claimHost("status", host)
		name := listenerName(host)
		Eventually(e.routes).WithTimeout(gatewayHostsTimeout).Should(Equal([]string{name}))
		Eventually(func(g Gomega) []string { return namespaceEvents(g, ns) }).WithTimeout(gatewayHostsTimeout).
			Should(ContainElement(And(HavePrefix("Normal "+ReasonHostPending+": "), ContainSubstring("NoCertificate"))))

		setStatus := func(programmed metav1.ConditionStatus, reason string) {
			Eventually(func(g Gomega) {
				gw := e.gateway(g)
				cond := func(t string, s metav1.ConditionStatus, reason string) metav1.Condition {
					return metav1.Condition{Type: t, Status: s, Reason: reason, Message: reason + " says the gateway", ObservedGeneration: gw.Generation,
						LastTransitionTime: metav1.Now()}
				}
				gw.Status.Listeners = []gatewayv1.ListenerStatus{{Name: gatewayv1.SectionName(name), AttachedRoutes: 1,
					SupportedKinds: []gatewayv1.RouteGroupKind{{Kind: "HTTPRoute"}},
					Conditions:     []metav1.Condition{cond("Accepted", metav1.ConditionTrue, "Accepted"), cond("Programmed", programmed, reason)}}}
				g.Expect(k8sClient.Status().Update(suiteCtx, gw)).To(Succeed())
			}).WithTimeout(gatewayHostsTimeout).Should(Succeed())
		}
		setStatus(metav1.ConditionTrue, "Programmed")
		Eventually(func(g Gomega) {
			var r gatewayv1.HTTPRoute
			g.Expect(k8sClient.Get(suiteCtx, client.ObjectKey{Namespace: e.redirector, Name: name}, &r)).To(Succeed())
			r.Status.Parents = []gatewayv1.RouteParentStatus{{
				ParentRef:      gatewayv1.ParentReference{Name: gatewayv1.ObjectName(e.gw.Name), Namespace: ptr.To(gatewayv1.Namespace(e.gw.Namespace)), SectionName: ptr.To(gatewayv1.SectionName(name))},
				ControllerName: "example.com/gateway",
				Conditions: []metav1.Condition{
					{Type: "Accepted", Status: metav1.ConditionTrue, Reason: "Accepted", ObservedGeneration: r.Generation, LastTransitionTime: metav1.Now()},
					{Type: "ResolvedRefs", Status: metav1.ConditionTrue, Reason: "ResolvedRefs", ObservedGeneration: r.Generation, LastTransitionTime: metav1.Now()},
				}}}
			g.Expect(k8sClient.Status().Update(suiteCtx, &r)).To(Succeed())
		}).WithTimeout(gatewayHostsTimeout).Should(Succeed())
		cert := &unstructured.Unstructured{}
		cert.SetGroupVersionKind(certificateGVK)
		cert.SetNamespace(e.gw.Namespace)
		cert.SetName(name)
		Expect(unstructured.SetNestedSlice(cert.Object, []any{map[string]any{"type": "Ready", "status": "True", "reason": "Ready", "message": "issued"}},
			"status", "conditions")).To(Succeed())
		Expect(k8sClient.Create(suiteCtx, cert)).To(Succeed())

		Eventually(func(g Gomega) []string { return namespaceEvents(g, ns) }).WithTimeout(gatewayHostsTimeout).
			Should(ContainElement(HavePrefix("Normal " + ReasonHostServed + ": https://" + host + "/ is served")))
		for _, c := range []string{HostConditionListener, HostConditionAccepted, HostConditionProgrammed, HostConditionCertificateReady} {
			Expect(gaugeOf(host, ns, c)).To(BeEquivalentTo(1), c)
		}

		By("the listener is no longer Programmed: a Warning with the Gateway's reason, and 0")
		setStatus(metav1.ConditionFalse, "AddressNotAssigned")
		Eventually(func(g Gomega) []string { return namespaceEvents(g, ns) }).WithTimeout(gatewayHostsTimeout).
			Should(ContainElement(And(HavePrefix("Warning "+ReasonHostNotServed+": "), ContainSubstring("AddressNotAssigned"))))
		Eventually(func() float64 { v, _ := hostGauge(host, ns, HostConditionProgrammed); return v }).WithTimeout(gatewayHostsTimeout).Should(BeZero())

		By("the claim goes: its series go")
		setClaim(ns, "")
		Eventually(func() bool { _, ok := hostGauge(host, ns, HostConditionAccepted); return ok }).WithTimeout(gatewayHostsTimeout).Should(BeFalse())
		Expect(client.IgnoreNotFound(k8sClient.Delete(suiteCtx, cert))).To(Succeed())
	})

	It("needs no more than the manager's ClusterRole and the Roles of config/gateway-hosts", func() {
		var user string
		e := newGatewayHostsEnvAs(func(redirector, gateway string) *rest.Config {
			user = grantGatewayHostsRoles(redirector, gateway, "public")
			c := rest.CopyConfig(cfg)
			c.Impersonate = rest.ImpersonationConfig{UserName: user}
			return c
		}, 1, true)
		host := "rbac." + e.redirector + ".example"
		claimHost("rbac", host)
		Eventually(func(g Gomega) {
			g.Expect(e.ownListeners(g)).To(Equal([]string{listenerName(host)}))
			g.Expect(e.routes(g)).To(Equal([]string{listenerName(host)}))
		}).WithTimeout(gatewayHostsTimeout).Should(Succeed())

		By("and no more: not another Gateway, not a route elsewhere, not a Secret")
		as := rest.CopyConfig(cfg)
		as.Impersonate = rest.ImpersonationConfig{UserName: user}
		c, err := client.New(as, client.Options{Scheme: scheme})
		Expect(err).NotTo(HaveOccurred())
		other := &gatewayv1.Gateway{ObjectMeta: metav1.ObjectMeta{Namespace: e.gw.Namespace, Name: "other"},
			Spec: gatewayv1.GatewaySpec{GatewayClassName: "traefik", Listeners: []gatewayv1.Listener{{Name: "http", Port: 80, Protocol: gatewayv1.HTTPProtocolType}}}}
		Expect(k8sClient.Create(suiteCtx, other)).To(Succeed())
		Expect(apierrors.IsForbidden(c.Get(suiteCtx, client.ObjectKeyFromObject(other), &gatewayv1.Gateway{}))).To(BeTrue())
		Expect(apierrors.IsForbidden(c.Patch(suiteCtx, other, client.Merge))).To(BeTrue())
		Expect(apierrors.IsForbidden(c.List(suiteCtx, &gatewayv1.HTTPRouteList{}, client.InNamespace(e.gw.Namespace)))).To(BeTrue())
		Expect(apierrors.IsForbidden(c.List(suiteCtx, &corev1.SecretList{}, client.InNamespace(e.gw.Namespace)))).To(BeTrue())
		Expect(apierrors.IsForbidden(c.Get(suiteCtx, client.ObjectKey{Namespace: e.gw.Namespace, Name: listenerName(host)}, &corev1.Secret{}))).To(BeTrue())
	})
})

// grantGatewayHostsRoles binds a service account of namespace redirector
// (standing for linkforge-system) to the manager's ClusterRole
// (config/rbac/role.yaml) and to the Roles of config/gateway-hosts for the
// Gateway gateway/name, as a user would fill them in; it returns the
// service account's user name.
func grantGatewayHostsRoles(redirector, gateway, name string) string {
	GinkgoHelper()
	replace := strings.NewReplacer("GATEWAY_NAMESPACE", gateway, "GATEWAY_NAME", name, "linkforge-system", redirector, "name: manager-role", "name: manager-role-"+redirector)
	var objs []*unstructured.Unstructured
	for _, f := range []string{"../config/gateway-hosts/gateway_role.yaml", "../config/gateway-hosts/routes_role.yaml", "../config/rbac/role.yaml"} {
		b, err := os.ReadFile(f)
		Expect(err).NotTo(HaveOccurred())
		for _, doc := range strings.Split(replace.Replace(string(b)), "\n---") {
			u := &unstructured.Unstructured{}
			Expect(yaml.Unmarshal([]byte(doc), &u.Object)).To(Succeed())
			if len(u.Object) > 0 {
				objs = append(objs, u)
			}
		}
	}
	objs = append(objs, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding", "metadata": map[string]any{"name": "manager-role-" + redirector},
		"roleRef":  map[string]any{"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "manager-role-" + redirector},
		"subjects": []any{map[string]any{"kind": "ServiceAccount", "name": "linkforge-manager", "namespace": redirector}},
	}})
	for _, o := range objs {
		Expect(k8sClient.Create(suiteCtx, o)).To(Succeed(), "%s %s", o.GetKind(), o.GetName())
	}
	return "system:serviceaccount:" + redirector + ":linkforge-manager"
}
