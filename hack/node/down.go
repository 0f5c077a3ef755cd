package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// down stops the node and removes what up made, in the order that leaves
// nothing behind (containerd's shims outlive containerd): the workloads
// through the API (the kubelet stops their sandboxes, so CNI releases
// their addresses and veths), kube-proxy's rules, the kubelet and the
// control plane's other processes, the containers left, containerd and its
// shims, the mounts, the cgroups, the bridge and the iptables chains. Each
// step runs whether or not the ones before it succeeded, so down also
// cleans up after a half-done up; running it twice is harmless.
func down(ctx context.Context, c *config) error {
	if os.Geteuid() != 0 {
		return errNotRoot
	}
	started := time.Now()
	if c.binDir == "" {
		b, _ := os.ReadFile(filepath.Join(c.runDir, "bin"))
		c.binDir = strings.TrimSpace(string(b))
	}
	deleteWorkloads(ctx, c)
	stop(c, proxy, 5*time.Second)
	if _, err := os.Stat(c.conf("kube-proxy.yaml")); err == nil {
		if _, err := run(ctx, c.bin(proxy), "--cleanup", "--config="+c.conf("kube-proxy.yaml")); err != nil {
			logf("kube-proxy --cleanup: %v", err)
		}
	}
	stop(c, kubelet, 10*time.Second)
	stop(c, scheduler, 5*time.Second)
	stop(c, controllerManager, 5*time.Second)
	removeContainers(ctx, c)
	stop(c, "containerd", 10*time.Second)
	killLeftovers(c)
	stop(c, apiserver, 10*time.Second)
	stop(c, "etcd", 5*time.Second)
	removeNetns(ctx, c)
	unmountAll(c)
	removeCgroups()
	removeChains(ctx, c)
	removeNetwork(ctx, c)
	restoreTunables(c)
	removeFiles(c)
	left := leftovers(c)
	if len(left) > 0 {
		return fmt.Errorf("down left behind:\n  %s", strings.Join(left, "\n  "))
	}
	logf("down in %.1fs; nothing left (logs kept in %s)", time.Since(started).Seconds(), filepath.Join(c.stateDir, "logs"))
	return nil
}

// deleteWorkloads deletes every controller of pods and then every pod,
// through the API, and waits (up to 40s) for the kubelet to have stopped
// them all.
func deleteWorkloads(ctx context.Context, c *config) {
	if _, ok := running(c, apiserver); !ok {
		return
	}
	if _, ok := running(c, kubelet); !ok {
		return
	}
	cs, err := clientset(c)
	if err != nil {
		logf("deleting workloads: %v", err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 45*time.Second)
	defer cancel()
	all := metav1.ListOptions{}
	bg := metav1.DeletePropagationBackground
	opts := metav1.DeleteOptions{PropagationPolicy: &bg}
	nss, err := cs.CoreV1().Namespaces().List(ctx, all)
	if err != nil {
		logf("deleting workloads: %v", err)
		return
	}
	for _, ns := range nss.Items {
		n := ns.Name
		apps := cs.AppsV1()
		_ = apps.Deployments(n).DeleteCollection(ctx, opts, all)
		_ = apps.StatefulSets(n).DeleteCollection(ctx, opts, all)
		_ = apps.DaemonSets(n).DeleteCollection(ctx, opts, all)
		_ = apps.ReplicaSets(n).DeleteCollection(ctx, opts, all)
		_ = cs.BatchV1().Jobs(n).DeleteCollection(ctx, opts, all)
	}
	grace := int64(1)
	for _, ns := range nss.Items {
		_ = cs.CoreV1().Pods(ns.Name).DeleteCollection(ctx, metav1.DeleteOptions{GracePeriodSeconds: &grace}, all)
	}
	if err := waitNoPods(ctx, cs); err != nil {
		logf("pods still there after deleting them: %v (removing their containers directly)", err)
	}
}

func waitNoPods(ctx context.Context, cs *kubernetes.Clientset) error {
	for {
		pods, err := cs.CoreV1().Pods(corev1.NamespaceAll).List(ctx, metav1.ListOptions{})
		if err == nil && len(pods.Items) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			if err == nil {
				err = fmt.Errorf("%d pods", len(pods.Items))
			}
			return fmt.Errorf("%w: %v", ctx.Err(), err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

// removeContainers kills and removes every container containerd still has.
func removeContainers(ctx context.Context, c *config) {
	if _, ok := running(c, "containerd"); !ok {
		return
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	out, err := ctr(ctx, c, "containers", "ls", "-q")
	if err != nil {
		logf("listing containers: %v", err)
		return
	}
	for _, id := range strings.Fields(out) {
		_, _ = ctr(ctx, c, "tasks", "kill", "--signal", "SIGKILL", id)
	}
	for _, id := range strings.Fields(out) {
		_, _ = ctr(ctx, c, "tasks", "delete", "--force", id)
		if _, err := ctr(ctx, c, "containers", "delete", id); err != nil {
			logf("%v", err)
		}
	}
}

// procs returns the pids of the processes for which match(cmdline, cgroup)
// holds.
func procs(match func(cmdline, cgroup string) bool) []int {
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		cmd, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		cg, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if match(strings.ReplaceAll(string(cmd), "\x00", " "), string(cg)) && alive(pid) {
			pids = append(pids, pid)
		}
	}
	return pids
}

// ours matches the processes the node leaves when killed: the shims of
// our containerd and whatever runs in the pods' cgroups (kubepods, which
// only the node's kubelet makes on this machine).
func ours(c *config) func(cmdline, cgroup string) bool {
	return func(cmdline, cgroup string) bool {
		return strings.Contains(cmdline, "containerd-shim") && strings.Contains(cmdline, c.containerdSock()) ||
			strings.Contains(cgroup, ":/kubepods")
	}
}

func killLeftovers(c *config) {
	for _, pid := range procs(ours(c)) {
		stopPid("leftover", pid, time.Second)
	}
}

// removeNetns deletes the pods' network namespaces that still hold an
// address of the pod subnet (those CNI did not release).
func removeNetns(ctx context.Context, c *config) {
	ents, _ := os.ReadDir("/run/netns")
	for _, e := range ents {
		if !strings.HasPrefix(e.Name(), "cni-") {
			continue
		}
		if !netnsHoldsSubnet(ctx, e.Name(), c) {
			continue
		}
		if _, err := run(ctx, "ip", "netns", "delete", e.Name()); err != nil {
			logf("%v", err)
		}
	}
}

func netnsHoldsSubnet(ctx context.Context, ns string, c *config) bool {
	out, err := run(ctx, "ip", "-n", ns, "-4", "-j", "addr")
	if err != nil {
		return false
	}
	var links []struct {
		Addrs []struct {
			Local string `json:"local"`
		} `json:"addr_info"`
	}
	if json.Unmarshal([]byte(out), &links) != nil {
		return false
	}
	for _, l := range links {
		for _, a := range l.Addrs {
			if ip, err := netip.ParseAddr(a.Local); err == nil && c.podSubnet.Contains(ip) {
				return true
			}
		}
	}
	return false
}

// mountsUnder returns the mount points under the state and run
// directories, deepest first.
func mountsUnder(c *config) []string {
	f, err := os.Open("/proc/self/mountinfo")
	if err != nil {
		return nil
	}
	defer func() { _ = f.Close() }()
	var mounts []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 64*1024), 1024*1024)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) < 5 {
			continue
		}
		mp := unescapeMount(fields[4])
		for _, d := range []string{c.stateDir, c.runDir} {
			if mp == d || strings.HasPrefix(mp, d+"/") {
				mounts = append(mounts, mp)
			}
		}
	}
	sort.Slice(mounts, func(i, j int) bool { return len(mounts[i]) > len(mounts[j]) })
	return mounts
}

// unescapeMount undoes mountinfo's octal escapes (\040 for a space).
func unescapeMount(s string) string {
	if !strings.Contains(s, `\`) {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] == '\\' && i+3 < len(s) {
			if v, err := strconv.ParseUint(s[i+1:i+4], 8, 8); err == nil {
				b.WriteByte(byte(v))
				i += 3
				continue
			}
		}
		b.WriteByte(s[i])
	}
	return b.String()
}

func unmountAll(c *config) {
	for i := 0; i < 3; i++ {
		mounts := mountsUnder(c)
		if len(mounts) == 0 {
			return
		}
		for _, m := range mounts {
			if err := syscall.Unmount(m, syscall.MNT_DETACH); err != nil {
				logf("unmounting %s: %v", m, err)
			}
		}
	}
}

// removeCgroups removes the kubelet's kubepods hierarchy in every cgroup
// v1 controller (and a v2 one), deepest first, once no process is in it.
func removeCgroups() {
	roots, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods")
	if v2, err := os.Stat("/sys/fs/cgroup/kubepods"); err == nil && v2.IsDir() {
		roots = append(roots, "/sys/fs/cgroup/kubepods")
	}
	for _, root := range roots {
		var dirs []string
		_ = filepath.WalkDir(root, func(p string, d os.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				dirs = append(dirs, p)
			}
			return nil
		})
		sort.Slice(dirs, func(i, j int) bool { return len(dirs[i]) > len(dirs[j]) })
		for _, d := range dirs {
			if err := syscall.Rmdir(d); err != nil {
				logf("removing cgroup %s: %v", d, err)
			}
		}
	}
}

// removeFiles removes the node's data (keeping its logs) and run
// directory, the CNI results containerd cached for our network, and the
// kubelet's links to our pods' logs.
func removeFiles(c *config) {
	removeHostPaths(c) // reads conf/paths.saved
	ents, _ := os.ReadDir(c.stateDir)
	for _, e := range ents {
		if e.Name() != "logs" {
			if err := os.RemoveAll(filepath.Join(c.stateDir, e.Name())); err != nil {
				logf("%v", err)
			}
		}
	}
	_ = os.RemoveAll(c.runDir)
	_ = os.Remove(filepath.Dir(c.runDir)) // /run/linkforge-node, if no other node's
}

// leftovers lists what down should have removed and did not.
func leftovers(c *config) []string {
	var left []string
	for _, name := range components {
		if pid, ok := running(c, name); ok {
			left = append(left, fmt.Sprintf("%s (pid %d)", name, pid))
		}
	}
	for _, pid := range procs(ours(c)) {
		left = append(left, fmt.Sprintf("process %d", pid))
	}
	for _, m := range mountsUnder(c) {
		left = append(left, "mount "+m)
	}
	if _, err := os.Stat("/sys/class/net/" + c.bridge); err == nil {
		left = append(left, "interface "+c.bridge)
	}
	if roots, _ := filepath.Glob("/sys/fs/cgroup/*/kubepods"); len(roots) > 0 {
		left = append(left, "cgroups "+strings.Join(roots, " "))
	}
	return left
}
