package main

import (
	"fmt"
	"os"
	"path/filepath"
)

// pauseImage is the pod sandbox image: no registry to pull one from, so
// up builds it (pause.go) and imports it; containerd's sandbox_image.
const pauseImage = "linkforge.invalid/pause:1"

func writeFile(path, content string) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, []byte(content), 0o644)
}

// containerdConfig: its own root, state and socket; the CRI plugin with the
// pause image built here, runc with cgroupfs, CNI from cniBinDir and our
// conf dir. restrict_oom_score_adj: processes here lack CAP_SYS_RESOURCE,
// so without it every sandbox fails ("can't get final child's PID from pipe").
func containerdConfig(c *config) string {
	return fmt.Sprintf(`version = 2
root = %q
state = %q
disabled_plugins = ["io.containerd.snapshotter.v1.aufs", "io.containerd.snapshotter.v1.btrfs", "io.containerd.snapshotter.v1.zfs", "io.containerd.snapshotter.v1.devmapper"]

[grpc]
  address = %q

[ttrpc]
  address = %q

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = %q
  restrict_oom_score_adj = true
  enable_selinux = false
  [plugins."io.containerd.grpc.v1.cri".containerd]
    snapshotter = "overlayfs"
    default_runtime_name = "runc"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc]
      runtime_type = "io.containerd.runc.v2"
      [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.runc.options]
        SystemdCgroup = false
        Root = %q
  [plugins."io.containerd.grpc.v1.cri".cni]
    bin_dir = %q
    conf_dir = %q
    max_conf_num = 1
`, filepath.Join(c.stateDir, "containerd"), filepath.Join(c.runDir, "containerd"),
		c.containerdSock(), c.containerdSock()+".ttrpc", pauseImage,
		filepath.Join(c.runDir, "runc"), c.cniBinDir, c.conf("cni"))
}

// cniConfig: the bridge plugin on the host bridge, which up made with the
// node's address; isGateway false and ipMasq false, so nothing is forwarded
// or masqueraded: a pod reaches the host (kube-apiserver, through the
// kubernetes Service's ClusterIP) and the other pods on the bridge.
func cniConfig(c *config) string {
	return fmt.Sprintf(`{
  "cniVersion": "0.4.0",
  "name": "linkforge-node",
  "plugins": [
    {
      "type": "bridge",
      "bridge": %q,
      "isGateway": false,
      "ipMasq": false,
      "hairpinMode": true,
      "ipam": {
        "type": "host-local",
        "dataDir": %q,
        "ranges": [[{"subnet": %q, "rangeStart": %q, "gateway": %q}]],
        "routes": [{"dst": %q, "gw": %q}]
      }
    },
    {"type": "loopback"}
  ]
}
`, c.bridge, filepath.Join(c.stateDir, "cni-ipam"), c.podSubnet, c.podSubnet.Addr().Next().Next(), c.nodeIP(),
		c.serviceSubnet, c.nodeIP())
}

// kubeletConfig: cgroup v1 (failCgroupV1: false) with the cgroupfs driver,
// no swap check, a resolv.conf of its own, no cluster DNS, the CA for
// client certificates and webhook authorization (kubectl logs, metrics).
func kubeletConfig(c *config) string {
	return fmt.Sprintf(`apiVersion: kubelet.config.k8s.io/v1beta1
kind: KubeletConfiguration
address: %q
port: %d
readOnlyPort: 0
healthzBindAddress: 127.0.0.1
healthzPort: %d
containerRuntimeEndpoint: unix://%s
cgroupDriver: cgroupfs
failCgroupV1: false
failSwapOn: false
resolvConf: %q
clusterDomain: cluster.local
tlsCertFile: %q
tlsPrivateKeyFile: %q
rotateCertificates: false
serverTLSBootstrap: false
authentication:
  anonymous:
    enabled: false
  webhook:
    enabled: true
  x509:
    clientCAFile: %q
authorization:
  mode: Webhook
staticPodPath: ""
registerNode: true
maxPods: 50
imageGCHighThresholdPercent: 100
imageGCLowThresholdPercent: 99
imageMinimumGCAge: 1000h
evictionHard:
  memory.available: "100Mi"
  nodefs.available: "1%%"
  nodefs.inodesFree: "1%%"
  imagefs.available: "1%%"
syncFrequency: 10s
fileCheckFrequency: 20s
nodeStatusUpdateFrequency: 5s
shutdownGracePeriod: 0s
podLogsDir: %q
`, c.nodeIP(), c.port(portKubelet), c.port(portKubeletHealthz), c.containerdSock(),
		c.conf("resolv.conf"), c.pki("kubelet-serving.crt"), c.pki("kubelet-serving.key"), c.pki("ca.crt"),
		filepath.Join(c.stateDir, "pod-logs"))
}

// proxyConfig: iptables mode, conntrack left as it is (no tuning of the
// host's tables), no localhost NodePorts (route_localnet stays off),
// metrics and healthz on loopback.
func proxyConfig(c *config) string {
	return fmt.Sprintf(`apiVersion: kubeproxy.config.k8s.io/v1alpha1
kind: KubeProxyConfiguration
mode: iptables
clientConnection:
  kubeconfig: %q
hostnameOverride: %q
bindAddress: %s
clusterCIDR: %q
metricsBindAddress: 127.0.0.1:%d
healthzBindAddress: 127.0.0.1:%d
nodePortAddresses: [%q]
conntrack:
  maxPerCore: 0
  min: 0
  tcpEstablishedTimeout: 0s
  tcpCloseWaitTimeout: 0s
iptables:
  localhostNodePorts: false
  masqueradeAll: false
`, c.kubeconfig("proxy"), c.name, c.nodeIP(), c.podSubnet, c.port(portProxyMetrics), c.port(portProxyHealthz),
		c.podSubnet.String())
}

// resolvConf is the pods' resolv.conf: no cluster DNS and nothing to ask
// beyond the pod itself (linkforge resolves no names).
const resolvConf = "nameserver 127.0.0.1\noptions ndots:1 attempts:1 timeout:1\n"

func writeConfigs(c *config) error {
	files := map[string]string{
		c.conf("containerd.toml"):           containerdConfig(c),
		c.conf("cni/10-linkforge.conflist"): cniConfig(c),
		c.conf("kubelet.yaml"):              kubeletConfig(c),
		c.conf("kube-proxy.yaml"):           proxyConfig(c),
		c.conf("resolv.conf"):               resolvConf,
	}
	for path, content := range files {
		if err := writeFile(path, content); err != nil {
			return err
		}
	}
	return nil
}
