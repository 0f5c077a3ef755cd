// Command node runs a real single-node Kubernetes cluster on this machine,
// for the cluster end-to-end suite (internal/clustere2e, make e2e-cluster):
// etcd, kube-apiserver, kube-controller-manager, kube-scheduler, containerd,
// the kubelet and kube-proxy, all of the version hack/envtest-versions.env
// pins (hack/node/binaries.sh builds them), started as plain processes (no
// systemd), as root.
//
//	node up [flags]     install what is missing, start the node, import the images
//	node down [flags]   stop everything up started and remove what it made
//	node env [flags]    print the variables the suite reads (KUBECONFIG, ...)
//	node import [flags] import the images of -images into the running node
//	                    (another release's, for the upgrade test)
//	node import-gateway [flags]
//	                    import images of bin/traefik and bin/cert-manager-controller
//	                    (make gateway-binaries) into the running node
//
// Networking stays on this machine: a host bridge with a private subnet of
// its own (refused when anything on the machine already uses it), the CNI
// bridge plugin with no gateway and no masquerade (forwarding stays off, so
// pods reach the host and each other, nothing else), the Service range routed
// to the bridge, and a guard chain in iptables that rejects any packet for
// either range that would leave by another interface.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	cmd, args := os.Args[1], os.Args[2:]
	cfg := &config{}
	fs := flag.NewFlagSet(cmd, flag.ExitOnError)
	cfg.flags(fs)
	if err := fs.Parse(args); err != nil {
		os.Exit(2)
	}
	if err := cfg.complete(); err != nil {
		fatalf("%v", err)
	}
	var err error
	switch cmd {
	case "up":
		err = runUp(cfg)
	case "down":
		err = down(context.Background(), cfg)
	case "env":
		cfg.printEnv(os.Stdout)
	case "import":
		err = importLayouts(context.Background(), cfg)
	case "import-gateway":
		err = importGateway(context.Background(), cfg)
	default:
		usage()
	}
	if err != nil {
		fatalf("%s: %v", cmd, err)
	}
}

// runUp brings the node up; on a failure or an interrupt after its checks
// it takes down whatever it had started, so a failed up leaves nothing
// running.
func runUp(cfg *config) error {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	// A node that is already up, or a subnet in use, is refused before
	// anything is made, and left alone.
	if err := preflight(ctx, cfg); err != nil {
		return err
	}
	err := up(ctx, cfg)
	if err == nil {
		return nil
	}
	if ctx.Err() != nil {
		err = fmt.Errorf("interrupted: %w", err)
	}
	logf("up failed (%v); taking the node down", err)
	stop()
	if derr := down(context.Background(), cfg); derr != nil {
		logf("down: %v", derr)
	}
	return err
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: node up|down|env|import|import-gateway [flags]; node up -h for the flags")
	os.Exit(2)
}

func fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "node: "+format+"\n", args...)
	os.Exit(1)
}

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "node: "+format+"\n", args...)
}
