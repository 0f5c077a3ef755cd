// Package chart holds the tests of the Helm chart in config/helm/linkforge:
// with its default values the chart renders the same objects as
// `kubectl kustomize config/default` (names, namespaces, labels, RBAC rules,
// Deployments), its copies of the generated CRD and roles equal their sources,
// its expose values render the HTTPRoute and Ingress and the public base URL
// they give (as the components of config/expose do), its gatewayHosts values
// render the manager's --gateway flags and the Roles config/gateway-hosts
// grants, each bad value of either refused with a message, and the rendered
// chart applies to an envtest API server (the HTTPRoute against the Gateway
// API's CRD, which `go mod download` fetches) with exactly the Gateway hosts'
// access.
//
// The tests run bin/helm, which `make helm` builds (`make test` does it first).
package chart
