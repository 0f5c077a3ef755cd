// Package gatewaytest runs the Gateway API implementation and cert-manager
// that hack/gateway builds from their Go modules (make gateway-binaries)
// against a local control plane, out of cluster and on loopback, and sends
// HTTPS through them: the groundwork of issue 56's tests through a real
// Gateway. It is a package of linkforge's module, not hack/gateway's, so
// that it starts the control plane and the binaries with internal/testenv
// and internal/devenv as the e2e suites do, and compiles none of Traefik or
// cert-manager: it speaks to them through the API server (unstructured
// objects) and HTTPS alone. TestHTTPSThroughTraefikGateway sends HTTPS to
// a plain backend through a Gateway and an Ingress;
// TestLinkforgeHostsThroughTraefikGateway runs linkforge's own flow, the
// real bin/manager with --gateway and bin/redirector, from a namespace's
// linkforge.io/domain to https://<host>/<code> answering 302. Both need the
// binaries, so make test does not run them yet: make gateway-test does.
package gatewaytest
