// Package gatewaytest runs the Gateway API implementation and cert-manager
// that hack/gateway builds from their Go modules (make gateway-binaries),
// and sends HTTPS through them. It is a package of linkforge's module, not
// hack/gateway's, so that it starts the control plane and the binaries with
// internal/testenv and internal/devenv as the e2e suites do, and compiles
// none of Traefik or cert-manager: it speaks to them through the API server
// (unstructured objects) and HTTPS alone.
//
// Its non-test files are what both places that run them share: the flags
// (CertManagerArgs, TraefikArgs), the CA (InstallIssuers), the pods the
// node suite runs (InCluster, Images) and issue 56's flow (HostsFlow), from
// a namespace's linkforge.io/domain to https://<host>/<code> answering 302.
// Its tests (build tag gatewaytest, make gateway-test) run out of cluster
// on a local control plane: TestHTTPSThroughTraefikGateway sends HTTPS to a
// plain backend through a Gateway and an Ingress;
// TestLinkforgeHostsThroughTraefikGateway runs HostsFlow with the real
// bin/manager (--gateway) and bin/redirector. The node suite
// (internal/clustere2e, make test) runs HostsFlow with the release's pods.
package gatewaytest
