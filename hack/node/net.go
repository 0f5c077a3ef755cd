package main

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strings"
)

// subnetsFree fails when the bridge exists or when any address or route of
// this machine (all tables) overlaps the pod or the service subnet: the
// node must not take a range something else uses.
func subnetsFree(ctx context.Context, c *config) error {
	if _, err := os.Stat("/sys/class/net/" + c.bridge); err == nil {
		return fmt.Errorf("interface %s exists (a node still up? run down first, or choose another -bridge)", c.bridge)
	}
	out, err := run(ctx, "ip", "-j", "-4", "route", "show", "table", "all")
	if err != nil {
		return err
	}
	var routes []struct {
		Dst string `json:"dst"`
		Dev string `json:"dev"`
	}
	if err := json.Unmarshal([]byte(out), &routes); err != nil {
		return fmt.Errorf("reading the routes: %w", err)
	}
	var used []string
	for _, r := range routes {
		if r.Dst == "default" {
			continue // the way off the machine, which the node never routes to
		}
		p, err := parsePrefix(r.Dst)
		if err != nil {
			continue
		}
		for _, mine := range []netip.Prefix{c.podSubnet, c.serviceSubnet} {
			if p.Overlaps(mine) {
				used = append(used, fmt.Sprintf("%s overlaps the route %s dev %s", mine, r.Dst, r.Dev))
			}
		}
	}
	if len(used) > 0 {
		return fmt.Errorf("the node's subnets are in use on this machine (choose others: -pod-subnet, -service-subnet):\n  %s", strings.Join(used, "\n  "))
	}
	return nil
}

func parsePrefix(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		return netip.ParsePrefix(s)
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// makeNetwork makes the bridge with the node's address, routes the service
// range to it, and installs the guard chain.
func makeNetwork(ctx context.Context, c *config) error {
	steps := []string{
		"ip link add " + c.bridge + " type bridge",
		fmt.Sprintf("ip addr add %s/%d dev %s", c.nodeIP(), c.podSubnet.Bits(), c.bridge),
		"ip link set " + c.bridge + " up",
		// A ClusterIP that kube-proxy has not rewritten goes to the bridge
		// (and is rejected below), never to the default route.
		fmt.Sprintf("ip route add %s dev %s src %s", c.serviceSubnet, c.bridge, c.nodeIP()),
	}
	for _, s := range steps {
		f := strings.Fields(s)
		if _, err := run(ctx, f[0], f[1:]...); err != nil {
			return err
		}
	}
	return installGuard(ctx, c)
}

// installGuard: in the filter table, OUTPUT and FORWARD jump first to the
// node's chain, which rejects a packet to the pod subnet that would leave
// by any interface but the bridge or loopback, any packet from the pod
// subnet that would be forwarded off the bridge, and any packet still
// addressed to a ClusterIP (kube-proxy rewrites those it serves before the
// filter table sees them).
func installGuard(ctx context.Context, c *config) error {
	chain := c.guardChain()
	pods, svcs := c.podSubnet.String(), c.serviceSubnet.String()
	rules := []string{
		"-N " + chain,
		"-A " + chain + " -d " + svcs + " -j REJECT",
		"-A " + chain + " -o " + c.bridge + " -j RETURN",
		"-A " + chain + " -o lo -j RETURN",
		"-A " + chain + " -d " + pods + " -j REJECT",
		"-A " + chain + " -s " + pods + " -j REJECT",
		"-I OUTPUT 1 -j " + chain,
		"-I FORWARD 1 -j " + chain,
	}
	for _, r := range rules {
		if _, err := run(ctx, "iptables", append([]string{"-w", "-t", "filter"}, strings.Fields(r)...)...); err != nil {
			return err
		}
	}
	return nil
}

// removeNetwork undoes makeNetwork; each step may have been done or not.
func removeNetwork(ctx context.Context, c *config) {
	chain := c.guardChain()
	for _, hook := range []string{"OUTPUT", "FORWARD"} {
		for i := 0; i < 5; i++ {
			if _, err := run(ctx, "iptables", "-w", "-t", "filter", "-D", hook, "-j", chain); err != nil {
				break
			}
		}
	}
	_, _ = run(ctx, "iptables", "-w", "-t", "filter", "-F", chain)
	_, _ = run(ctx, "iptables", "-w", "-t", "filter", "-X", chain)
	if _, err := os.Stat("/sys/class/net/" + c.bridge); err == nil {
		_, _ = run(ctx, "ip", "route", "del", c.serviceSubnet.String(), "dev", c.bridge)
		if _, err := run(ctx, "ip", "link", "del", c.bridge); err != nil {
			logf("%v", err)
		}
	}
}

// The kernel settings the kubelet changes (it sets what it needs when
// protectKernelDefaults is off) and kube-proxy may: up records them,
// down puts them back.
var tunables = []string{
	"vm/overcommit_memory", "vm/panic_on_oom", "kernel/panic", "kernel/panic_on_oops",
	"kernel/keys/root_maxkeys", "kernel/keys/root_maxbytes", "net/ipv4/conf/all/route_localnet",
}

func saveTunables(c *config) error {
	var b strings.Builder
	for _, t := range tunables {
		v, err := os.ReadFile("/proc/sys/" + t)
		if err != nil {
			continue
		}
		fmt.Fprintf(&b, "%s=%s\n", t, strings.TrimSpace(string(v)))
	}
	return writeFile(c.conf("sysctl.saved"), b.String())
}

func restoreTunables(c *config) {
	b, err := os.ReadFile(c.conf("sysctl.saved"))
	if err != nil {
		return
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		k, v, ok := strings.Cut(line, "=")
		if !ok {
			continue
		}
		if err := os.WriteFile("/proc/sys/"+k, []byte(v), 0o644); err != nil {
			logf("restoring %s: %v", k, err)
		}
	}
	_ = os.Remove(c.conf("sysctl.saved"))
}

// packages are the Debian packages the node needs, each with a file it
// installs.
var packages = map[string]string{
	"containerd":                  "/usr/bin/containerd",
	"runc":                        "/usr/sbin/runc",
	"containernetworking-plugins": "/usr/lib/cni/bridge",
	"iptables":                    "/usr/sbin/iptables",
	"conntrack":                   "/usr/sbin/conntrack",
}

// installPackages apt-get installs the packages that are missing (as CI
// runs, as root).
func installPackages(ctx context.Context, c *config) error {
	var missing []string
	for pkg, file := range packages {
		if _, err := os.Stat(file); err != nil {
			missing = append(missing, pkg)
		}
	}
	if len(missing) == 0 {
		return nil
	}
	if !c.install {
		return fmt.Errorf("missing packages %s (-install=false)", strings.Join(missing, " "))
	}
	logf("installing %s (apt-get)", strings.Join(missing, " "))
	env := append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	for _, args := range [][]string{{"update", "-qq"}, append([]string{"install", "-y", "-qq", "--no-install-recommends"}, missing...)} {
		cmd := exec.CommandContext(ctx, "apt-get", args...)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("apt-get %s: %w\n%s", strings.Join(args, " "), err, out)
		}
	}
	return nil
}
