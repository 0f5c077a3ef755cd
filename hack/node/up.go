package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

// components are the node's processes in the order up starts them; down
// stops them in the reverse order (after the workloads).
var components = []string{"etcd", apiserver, controllerManager, scheduler, "containerd", kubelet, proxy}

// The components' names, their binaries' and their logs'.
const (
	apiserver         = "kube-apiserver"
	controllerManager = "kube-controller-manager"
	scheduler         = "kube-scheduler"
	kubelet           = "kubelet"
	proxy             = "kube-proxy"
)

// binaries are the programs the node runs from -bin.
var binaries = []string{"etcd", apiserver, controllerManager, scheduler, kubelet, proxy, "kubectl"}

// up starts the node (after preflight).
func up(ctx context.Context, c *config) error {
	started := time.Now()
	for _, d := range []string{c.stateDir, c.runDir} {
		if err := os.RemoveAll(d); err != nil {
			return err
		}
	}
	if err := writePKI(c); err != nil {
		return err
	}
	if err := writeConfigs(c); err != nil {
		return err
	}
	if err := saveTunables(c); err != nil {
		return err
	}
	if err := saveChains(ctx, c); err != nil {
		return err
	}
	if err := saveHostPaths(c); err != nil {
		return err
	}
	// down needs the binaries too (kube-proxy --cleanup).
	if err := writeFile(filepath.Join(c.runDir, "bin"), c.binDir+"\n"); err != nil {
		return err
	}
	if err := makeNetwork(ctx, c); err != nil {
		return err
	}
	steps := []func(context.Context, *config) error{startControlPlane, startContainerd, importImages, startKubelet, startProxy, waitCluster}
	for _, step := range steps {
		if err := step(ctx, c); err != nil {
			return err
		}
	}
	if err := writeFile(filepath.Join(c.stateDir, "node.env"), envString(c)); err != nil {
		return err
	}
	logf("up in %.1fs: node %s at %s (bridge %s, pods %s, services %s); KUBECONFIG=%s",
		time.Since(started).Seconds(), c.name, c.server(), c.bridge, c.podSubnet, c.serviceSubnet, c.kubeconfig("admin"))
	return nil
}

func envString(c *config) string {
	var b strings.Builder
	c.printEnv(&b)
	return b.String()
}

// preflight checks what up needs and refuses a node that is still up or
// whose subnets or bridge something else uses.
func preflight(ctx context.Context, c *config) error {
	if os.Geteuid() != 0 {
		return errNotRoot
	}
	if c.binDir == "" {
		return fmt.Errorf("-bin: the directory of the Kubernetes binaries (hack/node/binaries.sh prints it)")
	}
	for _, b := range binaries {
		if _, err := os.Stat(c.bin(b)); err != nil {
			return fmt.Errorf("%s: %w (hack/node/binaries.sh builds it)", b, err)
		}
	}
	for _, name := range components {
		if pid, ok := running(c, name); ok {
			return fmt.Errorf("%s still runs (pid %d): the node is up; run down first", name, pid)
		}
	}
	if m := mountsUnder(c); len(m) > 0 {
		return fmt.Errorf("mounts left under %s or %s (run down first): %s", c.stateDir, c.runDir, strings.Join(m, ", "))
	}
	if err := installPackages(ctx, c); err != nil {
		return err
	}
	return subnetsFree(ctx, c)
}

func startControlPlane(ctx context.Context, c *config) error {
	etcdURL := fmt.Sprintf("http://127.0.0.1:%d", c.port(portEtcd))
	peerURL := fmt.Sprintf("http://127.0.0.1:%d", c.port(portEtcdPeer))
	if err := start(c, "etcd", c.bin("etcd"),
		"--name", "node", "--data-dir", filepath.Join(c.stateDir, "etcd"),
		"--listen-client-urls", etcdURL, "--advertise-client-urls", etcdURL,
		"--listen-peer-urls", peerURL, "--initial-advertise-peer-urls", peerURL,
		"--initial-cluster", "node="+peerURL, "--unsafe-no-fsync", "--log-level", "warn"); err != nil {
		return err
	}
	if err := waitFor(ctx, c, "etcd", 30*time.Second, httpOK(etcdURL+"/health")); err != nil {
		return err
	}
	if err := start(c, apiserver, c.bin(apiserver), apiserverArgs(c, etcdURL)...); err != nil {
		return err
	}
	ready, err := httpsOK(c, c.server()+"/readyz", "admin")
	if err != nil {
		return err
	}
	if err := waitFor(ctx, c, apiserver, 90*time.Second, ready); err != nil {
		return err
	}
	for _, comp := range []struct{ name, user string }{{controllerManager, "controller-manager"}, {scheduler, "scheduler"}} {
		if err := start(c, comp.name, c.bin(comp.name), controllerArgs(c, comp.name, comp.user)...); err != nil {
			return err
		}
	}
	for _, comp := range []struct {
		name string
		port int
	}{{controllerManager, portControllerManager}, {scheduler, portScheduler}} {
		ok, err := httpsOK(c, fmt.Sprintf("https://127.0.0.1:%d/healthz", c.port(comp.port)), "")
		if err != nil {
			return err
		}
		if err := waitFor(ctx, c, comp.name, 60*time.Second, ok); err != nil {
			return err
		}
	}
	return nil
}

// controllerArgs are the flags of the controller-manager or the scheduler
// (name), which log in as user.
func controllerArgs(c *config, name, user string) []string {
	kc := c.kubeconfig(user)
	port := portScheduler
	args := make([]string, 0, 16)
	if name == controllerManager {
		port = portControllerManager
		args = append(args,
			"--service-account-private-key-file="+c.pki("sa.key"), "--root-ca-file="+c.pki("ca.crt"),
			"--use-service-account-credentials=true", "--service-cluster-ip-range="+c.serviceSubnet.String(),
			"--allocate-node-cidrs=false", "--cluster-signing-cert-file="+c.pki("ca.crt"),
			"--cluster-signing-key-file="+c.pki("ca.key"))
	}
	return append(args, "--kubeconfig="+kc, "--authentication-kubeconfig="+kc, "--authorization-kubeconfig="+kc,
		"--bind-address=127.0.0.1", "--secure-port="+strconv.Itoa(c.port(port)), "--leader-elect=false",
		"--cert-dir="+filepath.Join(c.stateDir, user))
}

func apiserverArgs(c *config, etcdURL string) []string {
	return []string{
		"--etcd-servers=" + etcdURL,
		"--bind-address=" + c.nodeIP().String(), "--advertise-address=" + c.nodeIP().String(),
		"--secure-port=" + strconv.Itoa(c.port(portAPIServer)),
		"--service-cluster-ip-range=" + c.serviceSubnet.String(),
		"--tls-cert-file=" + c.pki("apiserver.crt"), "--tls-private-key-file=" + c.pki("apiserver.key"),
		"--client-ca-file=" + c.pki("ca.crt"),
		"--kubelet-client-certificate=" + c.pki("apiserver-kubelet-client.crt"),
		"--kubelet-client-key=" + c.pki("apiserver-kubelet-client.key"),
		"--kubelet-certificate-authority=" + c.pki("ca.crt"),
		// Not the node's name, which nothing here resolves.
		"--kubelet-preferred-address-types=InternalIP",
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + c.pki("sa.pub"),
		"--service-account-signing-key-file=" + c.pki("sa.key"),
		"--authorization-mode=Node,RBAC",
		"--enable-admission-plugins=NodeRestriction",
		"--cert-dir=" + filepath.Join(c.stateDir, "apiserver"),
		"--profiling=false",
	}
}

func startContainerd(ctx context.Context, c *config) error {
	if err := start(c, "containerd", "containerd", "--config", c.conf("containerd.toml")); err != nil {
		return err
	}
	return waitFor(ctx, c, "containerd", 30*time.Second, func() error {
		_, err := ctr(ctx, c, "version")
		return err
	})
}

func startKubelet(ctx context.Context, c *config) error {
	if err := start(c, kubelet, c.bin(kubelet),
		"--config="+c.conf("kubelet.yaml"), "--kubeconfig="+c.kubeconfig("kubelet"),
		"--hostname-override="+c.name, "--node-ip="+c.nodeIP().String(),
		"--root-dir="+filepath.Join(c.stateDir, "kubelet")); err != nil {
		return err
	}
	if err := waitFor(ctx, c, kubelet, 60*time.Second, httpOK(fmt.Sprintf("http://127.0.0.1:%d/healthz", c.port(portKubeletHealthz)))); err != nil {
		return err
	}
	cs, err := clientset(c)
	if err != nil {
		return err
	}
	return waitFor(ctx, c, kubelet, 90*time.Second, func() error {
		n, err := cs.CoreV1().Nodes().Get(ctx, c.name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				if cond.Status == corev1.ConditionTrue {
					return nil
				}
				return fmt.Errorf("node %s not Ready: %s", c.name, cond.Message)
			}
		}
		return fmt.Errorf("node %s has no Ready condition yet", c.name)
	})
}

func startProxy(ctx context.Context, c *config) error {
	if err := start(c, proxy, c.bin(proxy), "--config="+c.conf("kube-proxy.yaml")); err != nil {
		return err
	}
	return waitFor(ctx, c, proxy, 60*time.Second, httpOK(fmt.Sprintf("http://127.0.0.1:%d/healthz", c.port(portProxyHealthz))))
}

// waitCluster waits for what a workload needs: the default ServiceAccount
// and the root CA ConfigMap (the controller-manager's).
func waitCluster(ctx context.Context, c *config) error {
	cs, err := clientset(c)
	if err != nil {
		return err
	}
	return waitFor(ctx, c, controllerManager, 60*time.Second, func() error {
		if _, err := cs.CoreV1().ServiceAccounts("default").Get(ctx, "default", metav1.GetOptions{}); err != nil {
			return err
		}
		_, err := cs.CoreV1().ConfigMaps("default").Get(ctx, "kube-root-ca.crt", metav1.GetOptions{})
		return err
	})
}

func clientset(c *config) (*kubernetes.Clientset, error) {
	rc, err := clientcmd.BuildConfigFromFlags("", c.kubeconfig("admin"))
	if err != nil {
		return nil, err
	}
	rc.Timeout = 10 * time.Second
	return kubernetes.NewForConfig(rc)
}
