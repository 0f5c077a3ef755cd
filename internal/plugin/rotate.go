package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/linkforge/linkforge/internal/peer"
)

const rotateUsage = `rotate-peer-key [--previous-window 10m] [--secret linkforge-peer-key] [-n linkforge-system]

Replaces the redirectors' peer key (the Secret that authenticates their
peer port) with a new random key, keeping the one before in the Secret.
Every redirector replica loads the new key within seconds (it watches the
Secret), accepts the previous one for --previous-window after it does and
signs with the new one 30s after it does: no restart, and no forward
refused while the replicas load it. Use --previous-window 0 for a key that
leaked: the replicas stop accepting it as soon as they load the new one
(forwards between replicas that have loaded it and those that have not
are refused meanwhile: a few reservations through the API server, never
a use past maxUses). Needs update on that Secret (a cluster admin has it).
`

// defaultSystemNamespace is where the release installs linkforge.
const defaultSystemNamespace = "linkforge-system"

func runRotatePeerKey(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	cmd := newCommand(verbRotatePeerKey, rotateUsage, stderr)
	window := cmd.flags.Duration("previous-window", peer.DefaultPreviousKeyWindow, "how long each replica still accepts the previous key after it loads the new one (0: not at all)")
	secret := cmd.flags.String("secret", "linkforge-peer-key", "the peer key's Secret (the redirectors' --peer-key-secret)")
	rest, err := cmd.parse(args)
	if err != nil {
		return err
	}
	if len(rest) != 0 {
		return usageErrorf(cmd.name, "rotate-peer-key takes no arguments, got %q", rest)
	}
	if *window < 0 {
		return usageErrorf(cmd.name, "--previous-window %s: a duration of 0 or more", *window)
	}
	cfg, _, err := cmd.cluster.Config()
	if err != nil {
		return err
	}
	ns := cmd.cluster.ExplicitNamespace()
	if ns == "" {
		ns = defaultSystemNamespace // where the release runs, not the context's namespace
	}
	scheme := runtime.NewScheme()
	if err := corev1.AddToScheme(scheme); err != nil {
		return err
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return clusterErrorf("connect to %s: %v", cfg.Host, err)
	}
	name := types.NamespacedName{Namespace: ns, Name: *secret}
	gen, err := peer.Rotate(ctx, cl, name, *window, time.Now())
	switch {
	case apierrors.IsNotFound(err):
		return notReadyErrorf("no Secret %s: the manager creates it (is linkforge installed in namespace %s? pick it with -n, and the name with --secret)", name, ns)
	case apierrors.IsForbidden(err):
		return clusterErrorf("you may not read and update Secret %s: %s (check with: kubectl auth can-i update secrets/%s -n %s)", name, apiMessage(err), *secret, ns)
	case apierrors.IsConflict(err):
		return notReadyErrorf("Secret %s changed while it was rotated (another rotation?): run the command again", name)
	case err != nil:
		var status apierrors.APIStatus
		if isUnreachable(err) {
			return clusterErrorf("cannot reach the cluster: %v (is it running? is --kubeconfig/--context the one you mean?)", err)
		}
		if errors.As(err, &status) {
			return clusterErrorf("rotate the peer key in %s: %v", name, err)
		}
		return notReadyErrorf("rotate the peer key in %s: %v", name, err)
	}
	_, _ = fmt.Fprintf(stdout, "rotated the peer key in %s to generation %d.\n", name, gen)
	if *window > 0 {
		_, _ = fmt.Fprintf(stdout, "Each redirector loads it within seconds, signs with it %s later, and accepts the previous key for %s after it loads the new one. No restart needed.\n",
			min(peer.SignDelay, *window), *window)
	} else {
		_, _ = fmt.Fprintln(stdout, "Each redirector loads it within seconds and stops accepting the previous key at once. No restart needed.")
	}
	_, _ = fmt.Fprintf(stdout, "Check: every replica's linkforge_redirector_peer_key_generation reads %d.\n", gen)
	return nil
}
