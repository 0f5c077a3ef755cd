package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
)

// config is the node's settings: flags, each with an environment variable
// as its default, so make e2e-cluster can be configured without editing it.
type config struct {
	name          string // the node's name
	bridge        string
	podSubnet     netip.Prefix // the bridge's subnet; pods get addresses from it
	serviceSubnet netip.Prefix // ClusterIPs
	portBase      int
	stateDir      string // data and logs
	runDir        string // sockets and pid files
	binDir        string // kube-apiserver, etcd, kubelet, ...
	imagesDir     string // the OCI layouts of make images
	repo          string // the images' repository, as dist/install.yaml names them
	cniBinDir     string
	install       bool // apt-get install what is missing

	podSubnetFlag, serviceSubnetFlag string
}

func env(key, def string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return def
}

func envInt(key string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(key)); err == nil {
		return v
	}
	return def
}

func (c *config) flags(fs *flag.FlagSet) {
	fs.StringVar(&c.name, "name", env("LINKFORGE_NODE_NAME", "linkforge-node"), "the node's name (LINKFORGE_NODE_NAME)")
	fs.StringVar(&c.bridge, "bridge", env("LINKFORGE_NODE_BRIDGE", "lfnode0"), "the host bridge the pods are on (LINKFORGE_NODE_BRIDGE)")
	fs.StringVar(&c.podSubnetFlag, "pod-subnet", env("LINKFORGE_NODE_POD_SUBNET", "10.213.0.0/24"),
		"the bridge's subnet, its first address the node's; a private range nothing else on this machine uses (LINKFORGE_NODE_POD_SUBNET)")
	fs.StringVar(&c.serviceSubnetFlag, "service-subnet", env("LINKFORGE_NODE_SERVICE_SUBNET", "10.213.128.0/24"),
		"the Services' ClusterIP range, routed to the bridge (LINKFORGE_NODE_SERVICE_SUBNET)")
	fs.IntVar(&c.portBase, "port-base", envInt("LINKFORGE_NODE_PORT_BASE", 16440),
		"the first of the node's "+strconv.Itoa(numPorts)+" ports: kube-apiserver, etcd (client, peer), kubelet (API, healthz), "+
			"controller-manager, scheduler, kube-proxy (metrics, healthz) (LINKFORGE_NODE_PORT_BASE)")
	fs.StringVar(&c.stateDir, "state", env("LINKFORGE_NODE_STATE", ""), "data and logs (default /var/lib/linkforge-node/<bridge>) (LINKFORGE_NODE_STATE)")
	fs.StringVar(&c.runDir, "run", env("LINKFORGE_NODE_RUN", ""), "sockets and pid files (default /run/linkforge-node/<bridge>) (LINKFORGE_NODE_RUN)")
	fs.StringVar(&c.binDir, "bin", env("LINKFORGE_NODE_BIN", ""), "the Kubernetes binaries (hack/node/binaries.sh prints it) (LINKFORGE_NODE_BIN)")
	fs.StringVar(&c.imagesDir, "images", env("LINKFORGE_NODE_IMAGES", "dist/images"), "the OCI layouts make images wrote; empty: import none (LINKFORGE_NODE_IMAGES)")
	fs.StringVar(&c.repo, "repo", env("KO_DOCKER_REPO", "ghcr.io/linkforge/linkforge"), "the repository the release names the images in (KO_DOCKER_REPO)")
	fs.StringVar(&c.cniBinDir, "cni-bin", env("LINKFORGE_NODE_CNI_BIN", "/usr/lib/cni"), "the CNI plugins (LINKFORGE_NODE_CNI_BIN)")
	fs.BoolVar(&c.install, "install", env("LINKFORGE_NODE_INSTALL", "1") == "1", "apt-get install the packages that are missing (LINKFORGE_NODE_INSTALL)")
}

func (c *config) complete() error {
	var err error
	if c.podSubnet, err = netip.ParsePrefix(c.podSubnetFlag); err != nil {
		return fmt.Errorf("-pod-subnet: %w", err)
	}
	if c.serviceSubnet, err = netip.ParsePrefix(c.serviceSubnetFlag); err != nil {
		return fmt.Errorf("-service-subnet: %w", err)
	}
	c.podSubnet, c.serviceSubnet = c.podSubnet.Masked(), c.serviceSubnet.Masked()
	for _, p := range []netip.Prefix{c.podSubnet, c.serviceSubnet} {
		if !p.Addr().Is4() || !p.Addr().IsPrivate() || p.Bits() > 28 {
			return fmt.Errorf("subnet %s: want a private IPv4 range of at least 16 addresses", p)
		}
	}
	if c.podSubnet.Overlaps(c.serviceSubnet) {
		return fmt.Errorf("the pod subnet %s and the service subnet %s overlap", c.podSubnet, c.serviceSubnet)
	}
	if c.bridge == "" || len(c.bridge) > 15 {
		return errors.New("-bridge: want an interface name of 1-15 characters")
	}
	if c.portBase < 1024 || c.portBase+numPorts > 65535 {
		return fmt.Errorf("-port-base %d: out of range", c.portBase)
	}
	if c.stateDir == "" {
		c.stateDir = filepath.Join("/var/lib/linkforge-node", c.bridge)
	}
	if c.runDir == "" {
		c.runDir = filepath.Join("/run/linkforge-node", c.bridge)
	}
	for _, d := range []*string{&c.stateDir, &c.runDir, &c.imagesDir} {
		if *d == "" {
			continue
		}
		if *d, err = filepath.Abs(*d); err != nil {
			return err
		}
	}
	return nil
}

// The node's ports, from -port-base.
const (
	portAPIServer = iota
	portEtcd
	portEtcdPeer
	portKubelet
	portKubeletHealthz
	portControllerManager
	portScheduler
	portProxyMetrics
	portProxyHealthz
	numPorts
)

func (c *config) port(p int) int { return c.portBase + p }

// nodeIP is the bridge's address, the first of the pod subnet: the node's
// InternalIP, where kube-apiserver and the kubelet listen.
func (c *config) nodeIP() netip.Addr { return c.podSubnet.Addr().Next() }

// apiServiceIP is the kubernetes Service's ClusterIP: the first of the range.
func (c *config) apiServiceIP() netip.Addr { return c.serviceSubnet.Addr().Next() }

func (c *config) server() string {
	return fmt.Sprintf("https://%s:%d", c.nodeIP(), c.port(portAPIServer))
}

// Paths under the state and run directories.
func (c *config) pki(name string) string  { return filepath.Join(c.stateDir, "pki", name) }
func (c *config) conf(name string) string { return filepath.Join(c.stateDir, "conf", name) }
func (c *config) logFile(name string) string {
	return filepath.Join(c.stateDir, "logs", name+".log")
}
func (c *config) pidFile(name string) string { return filepath.Join(c.runDir, name+".pid") }
func (c *config) kubeconfig(user string) string {
	return filepath.Join(c.stateDir, "kubeconfig", user)
}
func (c *config) containerdSock() string { return filepath.Join(c.runDir, "containerd.sock") }
func (c *config) bin(name string) string { return filepath.Join(c.binDir, name) }

// guardChain is the iptables chain (filter table, jumped to from OUTPUT and
// FORWARD) that keeps the node's traffic on the machine.
func (c *config) guardChain() string { return "LINKFORGE-NODE-" + c.bridge }

// printEnv prints what the suite needs, as shell assignments: what up
// wrote, when the node is up.
func (c *config) printEnv(w io.Writer) {
	if b, err := os.ReadFile(filepath.Join(c.stateDir, "node.env")); err == nil {
		_, _ = w.Write(b)
		return
	}
	var b strings.Builder
	fmt.Fprintf(&b, "export LINKFORGE_CLUSTER_KUBECONFIG=%s\n", c.kubeconfig("admin"))
	if c.binDir != "" {
		fmt.Fprintf(&b, "export LINKFORGE_CLUSTER_KUBECTL=%s\n", c.bin("kubectl"))
	}
	fmt.Fprintf(&b, "export LINKFORGE_CLUSTER_NODE_IP=%s\n", c.nodeIP())
	fmt.Fprintf(&b, "export LINKFORGE_CLUSTER_LOGS=%s\n", filepath.Join(c.stateDir, "logs"))
	_, _ = io.WriteString(w, b.String())
}
