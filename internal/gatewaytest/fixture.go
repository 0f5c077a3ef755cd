package gatewaytest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"fmt"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// LoadedMachine is the e2e suites' allowance for a busy 2-core machine
// (internal/e2e): a wait can take four times as long as on an idle one.
const LoadedMachine = 4

// IssueAndServe bounds the time from a listener's creation to its first
// HTTPS answer: cert-manager issues one certificate (a key, a
// CertificateRequest signed by the CA, the Secret) and Traefik loads it and
// the route from its informers, each a few seconds on an idle machine; 30 s
// there, times LoadedMachine.
const IssueAndServe = 30 * time.Second * LoadedMachine

// The CA that signs every certificate of the tests: CAIssuer, a CA
// ClusterIssuer whose root (CACommonName) cert-manager issues itself from a
// self-signed ClusterIssuer into the Secret RootSecret of
// CertManagerNamespace, its --cluster-resource-namespace.
const (
	CertManagerNamespace = "cert-manager"
	CAIssuer             = "ca"
	CACommonName         = "linkforge-test-ca"
	RootSecret           = "root-ca"
	// GatewayClass is Traefik's (controllerName traefik.io/gateway-controller),
	// and IngressClass its Ingress provider's.
	GatewayClass = "traefik"
	IngressClass = "traefik"
)

// issuers are the ClusterIssuers and the root Certificate, in order.
var issuers = []string{
	"apiVersion: v1\nkind: Namespace\nmetadata: {name: " + CertManagerNamespace + "}",
	`
apiVersion: cert-manager.io/v1
kind: ClusterIssuer
metadata: {name: selfsigned}
spec: {selfSigned: {}}`,
	`
apiVersion: cert-manager.io/v1
kind: Certificate
metadata: {name: ` + RootSecret + `, namespace: ` + CertManagerNamespace + `}
spec:
  isCA: true
  commonName: ` + CACommonName + `
  secretName: ` + RootSecret + `
  privateKey: {algorithm: ECDSA, size: 256}
  issuerRef: {name: selfsigned, kind: ClusterIssuer, group: cert-manager.io}`,
	`
apiVersion: cert-manager.io/v1
kind: ClusterIssuer
metadata: {name: ` + CAIssuer + `}
spec: {ca: {secretName: ` + RootSecret + `}}`,
	`
apiVersion: gateway.networking.k8s.io/v1
kind: GatewayClass
metadata: {name: ` + GatewayClass + `}
spec: {controllerName: traefik.io/gateway-controller}`,
	`
apiVersion: networking.k8s.io/v1
kind: IngressClass
metadata: {name: ` + IngressClass + `}
spec: {controller: traefik.io/ingress-controller}`,
}

// InstallIssuers creates the CA, the GatewayClass and the IngressClass
// once cert-manager's controller runs, and returns the root's PEM when
// cert-manager has issued it.
func InstallIssuers(ctx context.Context, g gomega.Gomega, c client.Client) []byte {
	for _, m := range issuers {
		Apply(ctx, g, c, m)
	}
	var caPEM []byte
	g.Eventually(func(g gomega.Gomega) {
		s := Get(ctx, g, c, "v1", "Secret", CertManagerNamespace, RootSecret)
		ca, _, _ := unstructured.NestedString(s.Object, "data", "ca.crt")
		g.Expect(ca).NotTo(gomega.BeEmpty(), "the root's Secret has its ca.crt")
		var err error
		caPEM, err = base64.StdEncoding.DecodeString(ca)
		g.Expect(err).NotTo(gomega.HaveOccurred())
	}).WithTimeout(IssueAndServe).Should(gomega.Succeed(), "cert-manager issues the self-signed root")
	return caPEM
}

// CertManagerArgs are the flags cert-manager's controller runs with, in or
// out of a cluster: no webhook or cainjector (the tests' objects are
// complete), gateway-shim on, and the certificate Secrets owned by their
// Certificates, so that a garbage collector removes a host's Secret with
// its Certificate.
func CertManagerArgs() []string {
	return []string{"--leader-elect=false", "--cluster-resource-namespace=" + CertManagerNamespace,
		"--enable-gateway-api", "--enable-certificate-owner-ref"}
}

// TraefikArgs are Traefik's flags: its Kubernetes Gateway and Ingress
// providers, the entrypoints websecure (the HTTPS listeners') and web on
// these addresses, and nothing that calls out of the machine (version
// checks, usage statistics).
func TraefikArgs(websecure, web string) []string {
	return []string{"--entryPoints.websecure.address=" + websecure, "--entryPoints.web.address=" + web,
		"--providers.kubernetesGateway=true", "--providers.kubernetesIngress=true",
		"--global.checkNewVersion=false", "--global.sendAnonymousUsage=false",
		"--log.level=DEBUG", "--log.noColor=true"}
}

// Images are the images the node suite runs the two as, each built from
// the binary of bin/ named by its key (bin/node import-gateway).
var Images = map[string]string{
	"traefik":                 "linkforge.test/gateway/traefik:e2e",
	"cert-manager-controller": "linkforge.test/gateway/cert-manager-controller:e2e",
}

// Traefik's in-cluster names and ports: a Service TraefikService in
// TraefikNamespace, port 443 to the websecure entrypoint (ListenerPort, the
// port a Gateway's HTTPS listeners name) and 80 to web (8000).
const (
	TraefikNamespace = "traefik"
	TraefikService   = "traefik"
	ListenerPort     = 8443
)

// InCluster is the manifest that runs cert-manager's controller and Traefik
// as pods (the node suite): their namespaces (restricted), service
// accounts, the ClusterRoles their controllers need (from their charts and
// docs, written out: cert-manager's controller alone, without the ACME
// issuer's writes; Traefik's Ingress provider lists nodes too, and never
// syncs without them), one Deployment each from Images, and Traefik's Service.
func InCluster() string {
	args := func(a []string) string {
		q := make([]string, len(a))
		for i, s := range a {
			q[i] = fmt.Sprintf("%q", s)
		}
		return "[" + strings.Join(q, ", ") + "]"
	}
	return strings.NewReplacer(
		"$CM_NS", CertManagerNamespace, "$TRAEFIK_NS", TraefikNamespace, "$TRAEFIK_SVC", TraefikService,
		"$CM_IMAGE", Images["cert-manager-controller"], "$TRAEFIK_IMAGE", Images["traefik"],
		"$CM_ARGS", args(CertManagerArgs()),
		"$TRAEFIK_ARGS", args(TraefikArgs(fmt.Sprintf(":%d", ListenerPort), ":8000")),
		"$LISTENER_PORT", fmt.Sprint(ListenerPort),
	).Replace(inCluster)
}

const inCluster = `
apiVersion: v1
kind: Namespace
metadata: {name: $CM_NS, labels: {pod-security.kubernetes.io/enforce: restricted}}
---
apiVersion: v1
kind: Namespace
metadata: {name: $TRAEFIK_NS, labels: {pod-security.kubernetes.io/enforce: restricted}}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: cert-manager, namespace: $CM_NS}
---
apiVersion: v1
kind: ServiceAccount
metadata: {name: traefik, namespace: $TRAEFIK_NS}
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: e2e-cert-manager-controller}
rules:
- apiGroups: [cert-manager.io]
  resources: [issuers, clusterissuers, certificates, certificaterequests]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [cert-manager.io]
  resources: [issuers/status, clusterissuers/status, certificates/status, certificaterequests/status,
    certificates/finalizers, certificaterequests/finalizers, issuers/finalizers, clusterissuers/finalizers]
  verbs: [update, patch]
- apiGroups: [cert-manager.io]
  resources: [signers]
  resourceNames: [issuers.cert-manager.io/*, clusterissuers.cert-manager.io/*]
  verbs: [approve]
- apiGroups: [acme.cert-manager.io]
  resources: [orders, challenges]
  verbs: [get, list, watch]
- apiGroups: [""]
  resources: [secrets]
  verbs: [get, list, watch, create, update, patch, delete]
- apiGroups: [""]
  resources: [events]
  verbs: [create, patch]
- apiGroups: [events.k8s.io]
  resources: [events]
  verbs: [create, patch]
- apiGroups: [networking.k8s.io]
  resources: [ingresses]
  verbs: [get, list, watch]
- apiGroups: [networking.k8s.io]
  resources: [ingresses/finalizers]
  verbs: [update]
- apiGroups: [gateway.networking.k8s.io]
  resources: [gateways, httproutes, listenersets]
  verbs: [get, list, watch]
- apiGroups: [gateway.networking.k8s.io]
  resources: [gateways/finalizers, httproutes/finalizers, listenersets/finalizers]
  verbs: [update]
- apiGroups: [certificates.k8s.io]
  resources: [certificatesigningrequests]
  verbs: [get, list, watch, update]
- apiGroups: [certificates.k8s.io]
  resources: [certificatesigningrequests/status]
  verbs: [update, patch]
- apiGroups: [certificates.k8s.io]
  resources: [signers]
  resourceNames: [issuers.cert-manager.io/*, clusterissuers.cert-manager.io/*]
  verbs: [sign]
- apiGroups: [authorization.k8s.io]
  resources: [subjectaccessreviews]
  verbs: [create]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: e2e-cert-manager-controller}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: e2e-cert-manager-controller}
subjects: [{kind: ServiceAccount, name: cert-manager, namespace: $CM_NS}]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRole
metadata: {name: e2e-traefik}
rules:
- apiGroups: [""]
  resources: [namespaces, nodes]
  verbs: [list, watch]
- apiGroups: [""]
  resources: [pods]
  verbs: [get]
- apiGroups: [""]
  resources: [services, secrets, configmaps, endpoints]
  verbs: [get, list, watch]
- apiGroups: [discovery.k8s.io]
  resources: [endpointslices]
  verbs: [list, watch]
- apiGroups: [gateway.networking.k8s.io]
  resources: [gatewayclasses, gateways, httproutes, grpcroutes, tcproutes, tlsroutes, udproutes, referencegrants, backendtlspolicies, listenersets]
  verbs: [get, list, watch]
- apiGroups: [gateway.networking.k8s.io]
  resources: [gatewayclasses/status, gateways/status, httproutes/status, grpcroutes/status, tcproutes/status, tlsroutes/status,
    udproutes/status, referencegrants/status, backendtlspolicies/status, listenersets/status]
  verbs: [update]
- apiGroups: [networking.k8s.io]
  resources: [ingresses, ingressclasses]
  verbs: [get, list, watch]
- apiGroups: [networking.k8s.io]
  resources: [ingresses/status]
  verbs: [update]
---
apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: e2e-traefik}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: e2e-traefik}
subjects: [{kind: ServiceAccount, name: traefik, namespace: $TRAEFIK_NS}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: cert-manager-controller, namespace: $CM_NS}
spec:
  selector: {matchLabels: {app: cert-manager-controller}}
  template:
    metadata: {labels: {app: cert-manager-controller}}
    spec:
      serviceAccountName: cert-manager
      securityContext: {runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: controller
        image: $CM_IMAGE
        imagePullPolicy: Never
        args: $CM_ARGS
        securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
        volumeMounts: [{name: tmp, mountPath: /tmp}]
      volumes: [{name: tmp, emptyDir: {}}]
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: traefik, namespace: $TRAEFIK_NS}
spec:
  selector: {matchLabels: {app: traefik}}
  template:
    metadata: {labels: {app: traefik}}
    spec:
      serviceAccountName: traefik
      securityContext: {runAsNonRoot: true, runAsUser: 65532, runAsGroup: 65532, seccompProfile: {type: RuntimeDefault}}
      containers:
      - name: traefik
        image: $TRAEFIK_IMAGE
        imagePullPolicy: Never
        args: $TRAEFIK_ARGS
        ports: [{name: websecure, containerPort: $LISTENER_PORT}, {name: web, containerPort: 8000}]
        securityContext: {allowPrivilegeEscalation: false, readOnlyRootFilesystem: true, capabilities: {drop: [ALL]}}
        volumeMounts: [{name: tmp, mountPath: /tmp}]
      volumes: [{name: tmp, emptyDir: {}}]
---
apiVersion: v1
kind: Service
metadata: {name: $TRAEFIK_SVC, namespace: $TRAEFIK_NS}
spec:
  selector: {app: traefik}
  ports: [{name: websecure, port: 443, targetPort: websecure}, {name: web, port: 80, targetPort: web}]
`

// HTTPSClient trusts only the CA of caPEM and dials addr whatever the
// URL's host, as curl --resolve <host>:<port>:<addr> does.
func HTTPSClient(g gomega.Gomega, caPEM []byte, addr string) *http.Client {
	roots := x509.NewCertPool()
	g.ExpectWithOffset(1, roots.AppendCertsFromPEM(caPEM)).To(gomega.BeTrue(), "the root's ca.crt is a PEM certificate")
	return &http.Client{
		Timeout: 10 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig: &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12},
			DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
				var d net.Dialer
				return d.DialContext(ctx, network, addr)
			},
		},
	}
}
