package controllers

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// The conditions of a host, the condition label of
// linkforge_manager_gateway_host. Listener is 1 when the host has its
// listener on the Gateway, 0 when it has none (refused, or no Gateway); the
// others are 1 (True), 0 (False) or -1 (Unknown).
const (
	HostConditionListener         = "Listener"
	HostConditionAccepted         = "Accepted"
	HostConditionProgrammed       = "Programmed"
	HostConditionCertificateReady = "CertificateReady"
)

// Reasons of the events on a claiming Namespace about its host's state.
const (
	ReasonHostServed     = "GatewayHostServed"
	ReasonHostNotServed  = "GatewayHostNotServed"
	ReasonHostPending    = "GatewayHostPending"
	ReasonGatewayMissing = "GatewayNotFound"
)

// hostCondition is one condition of a host, read from the Gateway, the
// HTTPRoute or the Certificate.
type hostCondition struct {
	Type    string
	Status  metav1.ConditionStatus
	Reason  string
	Message string
}

// certificateState is what the manager knows of a host's Certificate.
type certificateState struct {
	// API is false when cert-manager's Certificate API is not installed.
	API bool
	// Cert is the Certificate named like the Secret (nil: none yet).
	Cert *unstructured.Unstructured
}

// findCondition returns the condition of type t, unknown if it is missing
// or was written for an older generation than generation (0: any).
func findCondition(conds []metav1.Condition, t string, generation int64, what string) hostCondition {
	for _, c := range conds {
		if c.Type != t {
			continue
		}
		if generation > 0 && c.ObservedGeneration > 0 && c.ObservedGeneration < generation {
			return hostCondition{Type: t, Status: metav1.ConditionUnknown, Reason: "Stale",
				Message: fmt.Sprintf("%s has not observed generation %d yet", what, generation)}
		}
		return hostCondition{Type: t, Status: c.Status, Reason: c.Reason, Message: what + ": " + c.Message}
	}
	return hostCondition{Type: t, Status: metav1.ConditionUnknown, Reason: "NotReported", Message: what + " reports no " + t + " condition yet"}
}

// both is a and b together: False if either is, else Unknown if either is,
// else True.
func both(t string, a, b hostCondition) hostCondition {
	for _, s := range []metav1.ConditionStatus{metav1.ConditionFalse, metav1.ConditionUnknown} {
		if a.Status == s {
			a.Type = t
			return a
		}
		if b.Status == s {
			b.Type = t
			return b
		}
	}
	return hostCondition{Type: t, Status: metav1.ConditionTrue, Reason: a.Reason, Message: a.Message + "; " + b.Message}
}

// hostConditions reads a host's Accepted, Programmed and CertificateReady:
// Accepted from its listener's and its route's Accepted, Programmed from its
// listener's Programmed and its route's ResolvedRefs, CertificateReady from
// the Certificate's Ready. gw and route may be nil (not there yet).
func hostConditions(gw *gatewayv1.Gateway, route *gatewayv1.HTTPRoute, h gatewayHost, cert certificateState) []hostCondition {
	var listenerConds, parentConds []metav1.Condition
	var gwGen, routeGen int64
	if gw != nil {
		gwGen = gw.Generation
		for i := range gw.Status.Listeners {
			if string(gw.Status.Listeners[i].Name) == h.Listener {
				listenerConds = gw.Status.Listeners[i].Conditions
			}
		}
	}
	if route != nil && gw != nil {
		routeGen = route.Generation
		for i := range route.Status.Parents {
			p := &route.Status.Parents[i].ParentRef
			ns := route.Namespace
			if p.Namespace != nil {
				ns = string(*p.Namespace)
			}
			if string(p.Name) == gw.Name && ns == gw.Namespace && (p.SectionName == nil || string(*p.SectionName) == h.Listener) {
				parentConds = route.Status.Parents[i].Conditions
			}
		}
	}
	listener := "listener " + h.Listener
	routeName := "HTTPRoute " + h.Listener
	accepted := both(HostConditionAccepted,
		findCondition(listenerConds, string(gatewayv1.ListenerConditionAccepted), gwGen, listener),
		findCondition(parentConds, string(gatewayv1.RouteConditionAccepted), routeGen, routeName))
	programmed := findCondition(listenerConds, string(gatewayv1.ListenerConditionProgrammed), gwGen, listener)
	if refs := findCondition(parentConds, string(gatewayv1.RouteConditionResolvedRefs), routeGen, routeName); refs.Status == metav1.ConditionFalse {
		programmed = refs
	}
	programmed.Type = HostConditionProgrammed
	return []hostCondition{accepted, programmed, certificateCondition(cert, h.Secret)}
}

// certificateCondition reads cert-manager's Certificate: its Ready
// condition, Unknown when there is no Certificate or no cert-manager.
func certificateCondition(cert certificateState, name string) hostCondition {
	t := HostConditionCertificateReady
	switch {
	case !cert.API:
		return hostCondition{Type: t, Status: metav1.ConditionUnknown, Reason: "NoCertManager",
			Message: "cert-manager's Certificate API (cert-manager.io/v1) is not installed: nothing issues Secret " + name}
	case cert.Cert == nil:
		return hostCondition{Type: t, Status: metav1.ConditionUnknown, Reason: "NoCertificate",
			Message: "no Certificate " + name + " yet (cert-manager's gateway-shim creates it from the Gateway's cert-manager.io annotations)"}
	}
	conds, _, _ := unstructured.NestedSlice(cert.Cert.Object, "status", "conditions")
	for _, c := range conds {
		m, ok := c.(map[string]any)
		if !ok || m["type"] != "Ready" {
			continue
		}
		status, _ := m["status"].(string)
		reason, _ := m["reason"].(string)
		msg, _ := m["message"].(string)
		switch metav1.ConditionStatus(status) {
		case metav1.ConditionTrue, metav1.ConditionFalse:
		default:
			status = string(metav1.ConditionUnknown)
		}
		return hostCondition{Type: t, Status: metav1.ConditionStatus(status), Reason: reason, Message: "Certificate " + name + ": " + msg}
	}
	return hostCondition{Type: t, Status: metav1.ConditionUnknown, Reason: "NotReported", Message: "Certificate " + name + " reports no Ready condition yet"}
}

// hostEvent is the event a host's conditions call for: Normal served when
// all are True, Warning when one is False, Normal pending otherwise.
func hostEvent(h gatewayHost, gateway string, conds []hostCondition) (eventType, reason, message string) {
	var falses, unknowns []string
	for _, c := range conds {
		s := fmt.Sprintf("%s (%s: %s)", c.Type, c.Reason, c.Message)
		switch c.Status {
		case metav1.ConditionFalse:
			falses = append(falses, s)
		case metav1.ConditionUnknown:
			unknowns = append(unknowns, s)
		}
	}
	switch {
	case len(falses) > 0:
		return corev1.EventTypeWarning, ReasonHostNotServed, fmt.Sprintf("https://%s/ is not served through Gateway %s: %s is False",
			h.Host, gateway, strings.Join(falses, "; "))
	case len(unknowns) > 0:
		return corev1.EventTypeNormal, ReasonHostPending, fmt.Sprintf("https://%s/ on Gateway %s (listener %s) waits for %s",
			h.Host, gateway, h.Listener, strings.Join(unknowns, "; "))
	}
	return corev1.EventTypeNormal, ReasonHostServed, fmt.Sprintf("https://%s/ is served through Gateway %s: listener %s and its HTTPRoute Accepted and Programmed, certificate %s Ready",
		h.Host, gateway, h.Listener, h.Secret)
}

// conditionValue is a condition's metric value: 1 True, 0 False, -1 Unknown.
func conditionValue(s metav1.ConditionStatus) float64 {
	switch s {
	case metav1.ConditionTrue:
		return 1
	case metav1.ConditionFalse:
		return 0
	}
	return -1
}
