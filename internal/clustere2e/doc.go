// Package clustere2e tests the release on a real Kubernetes node, as users
// run it: the images `make images` built, started by a real kubelet and
// containerd, installed with `kubectl apply --server-side -f
// dist/install.yaml`, reached through the redirector's Service (kube-proxy)
// and the pods' own addresses.
//
// `make e2e-cluster` (hack/node/e2e-cluster.sh) brings the node up with
// hack/node, installs the release, runs these tests and takes the node
// down. The tests build only with -tags clustere2e, as that script runs
// them: `go test ./...` has none of them to skip, and without a node
// (LINKFORGE_CLUSTER_KUBECONFIG unset) each fails at once.
package clustere2e
