// Package plugin is the cluster side of the linkforge CLI: the verbs that
// talk to the API server (create, get, open, qr). Installed on the PATH as
// kubectl-linkforge, the linkforge binary is a kubectl plugin, and these
// verbs read the usual kubeconfig flags (--kubeconfig, --context, -n, --as…)
// through client-go's clientcmd, which kubectl's own flags are built on.
//
// Not k8s.io/cli-runtime's genericclioptions.ConfigFlags: it wraps the same
// clientcmd overrides, but imports the resource builder and with it all of
// kustomize, which takes the binary from 27 MB to 51 MB (stripped), for
// flags that read the same.
//
// Exit status, shared by every verb (README.md, "The kubectl plugin"):
//
//	0  success
//	1  the link is not usable: an invalid URL, a conflict, not Ready in time
//	2  a usage error: an unknown flag, a missing argument, a bad flag value
//	3  a cluster error: no CRD, no permission, no credentials, unreachable
package plugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/pflag"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

// Exit statuses.
const (
	ExitOK       = 0
	ExitNotReady = 1 // invalid URL, conflict, not Ready, not found
	ExitUsage    = 2
	ExitCluster  = 3 // CRD missing, forbidden, unauthorized, unreachable
)

// FieldManager owns the fields this plugin writes.
const FieldManager = "kubectl-linkforge"

// resource names the kind as kubectl and RBAC rules do.
const resource = "shortlinks.linkforge.io"

// crdMissing is what to do when the API server does not know the kind.
const crdMissing = "the ShortLink CRD is not installed in this cluster: run `make install` or `kubectl apply -k config/crd` from a linkforge checkout (or install the Helm chart)"

// The verbs this package runs.
const (
	verbCreate = "create"
	verbGet    = "get"
	verbOpen   = "open"
	verbQR     = "qr"

	verbRotatePeerKey = "rotate-peer-key"
)

// Verbs are the verbs this package runs.
var Verbs = []string{verbCreate, verbGet, verbOpen, verbQR, verbRotatePeerKey}

// Name is how the user invoked the binary, for usage and hints:
// "kubectl linkforge" when it runs as a kubectl plugin.
func Name() string {
	if strings.HasPrefix(filepath.Base(os.Args[0]), "kubectl-") {
		return "kubectl linkforge"
	}
	return "linkforge"
}

// Run runs verb (one of Verbs) with args and returns the exit status.
func Run(verb string, args []string, stdout, stderr io.Writer) int {
	ctx := context.Background()
	var err error
	switch verb {
	case verbCreate:
		err = runCreate(ctx, args, stdout, stderr)
	case verbGet:
		err = runGet(ctx, args, stdout, stderr)
	case verbOpen:
		err = runOpen(ctx, args, stdout, stderr)
	case verbQR:
		err = runQR(ctx, args, stdout, stderr)
	case verbRotatePeerKey:
		err = runRotatePeerKey(ctx, args, stdout, stderr)
	default:
		err = usageErrorf("", "unknown verb %q", verb)
	}
	return report(err, stderr)
}

// exitError is an error with its exit status; its message is what the user reads.
type exitError struct {
	code int
	msg  string
	verb string // for usage errors: the verb whose --help to point to
}

func (e *exitError) Error() string { return e.msg }

func usageErrorf(verb, format string, args ...any) error {
	return &exitError{code: ExitUsage, msg: fmt.Sprintf(format, args...), verb: verb}
}

func notReadyErrorf(format string, args ...any) error {
	return &exitError{code: ExitNotReady, msg: fmt.Sprintf(format, args...)}
}

func clusterErrorf(format string, args ...any) error {
	return &exitError{code: ExitCluster, msg: fmt.Sprintf(format, args...)}
}

// errHelp ends a verb after it printed its help.
var errHelp = errors.New("help")

func report(err error, stderr io.Writer) int {
	if err == nil || errors.Is(err, errHelp) {
		return ExitOK
	}
	var e *exitError
	if !errors.As(err, &e) {
		_, _ = fmt.Fprintf(stderr, "error: %v\n", err)
		return ExitCluster
	}
	_, _ = fmt.Fprintf(stderr, "error: %s\n", e.msg)
	if e.verb != "" {
		_, _ = fmt.Fprintf(stderr, "See '%s %s --help' for usage.\n", Name(), e.verb)
	}
	return e.code
}

// command is the flags and cluster access a verb shares with the others.
type command struct {
	name    string // "create", for messages
	usage   string // the synopsis and description
	flags   *pflag.FlagSet
	cluster *ClusterFlags
	stderr  io.Writer
}

func newCommand(name, usage string, stderr io.Writer) *command {
	c := &command{
		name:    name,
		usage:   usage,
		flags:   pflag.NewFlagSet(name, pflag.ContinueOnError),
		cluster: NewClusterFlags(),
		stderr:  stderr,
	}
	c.flags.SetOutput(io.Discard) // parse errors are reported once, by report
	c.flags.SortFlags = false
	return c
}

// ClusterFlags are kubectl's connection flags: --kubeconfig, --context, -n,
// --as and the others of clientcmd. linkforge import --apply takes them too.
type ClusterFlags struct {
	// Flags holds them, to add to a command's flag set.
	Flags      *pflag.FlagSet
	kubeconfig string
	overrides  clientcmd.ConfigOverrides
}

// NewClusterFlags makes the flags, unparsed.
func NewClusterFlags() *ClusterFlags {
	c := &ClusterFlags{Flags: pflag.NewFlagSet("kubeconfig", pflag.ContinueOnError)}
	c.Flags.StringVar(&c.kubeconfig, clientcmd.RecommendedConfigPathFlag, "", "Path to the kubeconfig file to use for CLI requests")
	names := clientcmd.RecommendedConfigOverrideFlags("")
	// kubectl offers no basic authentication flags either.
	names.AuthOverrideFlags.Username.LongName = ""
	names.AuthOverrideFlags.Password.LongName = ""
	clientcmd.BindOverrideFlags(&c.overrides, c.Flags, names)
	return c
}

// ExplicitNamespace is -n as given, or empty.
func (c *ClusterFlags) ExplicitNamespace() string {
	return c.overrides.Context.Namespace
}

// Config is the REST config of the cluster the flags select and the
// namespace they select (-n, else the context's, else default). Its errors
// are cluster errors (exit status 3) with a hint.
func (c *ClusterFlags) Config() (*rest.Config, string, error) {
	rules := clientcmd.NewDefaultClientConfigLoadingRules() // $KUBECONFIG, ~/.kube/config
	rules.ExplicitPath = c.kubeconfig
	loader := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &c.overrides)
	namespace, _, err := loader.Namespace()
	if err != nil {
		return nil, "", clusterErrorf("reading the kubeconfig: %v", err)
	}
	cfg, err := loader.ClientConfig()
	if err != nil {
		return nil, "", clusterErrorf("no cluster to talk to: %v (set --kubeconfig or KUBECONFIG, or pick one with --context)", err)
	}
	cfg.UserAgent = FieldManager
	return cfg, namespace, nil
}

// NewClient is a client for ShortLinks on cfg.
func NewClient(cfg *rest.Config) (client.Client, error) {
	scheme := runtime.NewScheme()
	if err := linkv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	cl, err := client.New(cfg, client.Options{Scheme: scheme})
	if err != nil {
		return nil, ClusterError(err, "connect to", cfg.Host)
	}
	return cl, nil
}

// printUsage prints the verb's usage, its flags, then the kubeconfig flags.
func (c *command) printUsage() {
	_, _ = fmt.Fprintf(c.stderr, "usage: %s %s\nFlags:\n%s", Name(), c.usage, c.flags.FlagUsages())
	_, _ = fmt.Fprintf(c.stderr, "\nKubeconfig flags (as kubectl's):\n%s", c.cluster.Flags.FlagUsages())
}

// parse adds the kubeconfig flags and parses args. Flags and arguments mix,
// as in kubectl: create NAME URL --ttl 1h.
func (c *command) parse(args []string) ([]string, error) {
	all := pflag.NewFlagSet(c.name, pflag.ContinueOnError)
	all.SetOutput(io.Discard)
	all.AddFlagSet(c.flags)
	all.AddFlagSet(c.cluster.Flags)
	if err := all.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			c.printUsage()
			return nil, errHelp
		}
		return nil, usageErrorf(c.name, "%s", flagError(err))
	}
	return all.Args(), nil
}

// flagError is pflag's message of a parse error, and for a duration flag
// given something else ("--ttl 1w": time: unknown unit "w") how to write one.
func flagError(err error) string {
	var bad *pflag.InvalidValueError
	if errors.As(err, &bad) && bad.GetFlag().Value.Type() == "duration" {
		return fmt.Sprintf("invalid --%s %q: use a duration such as 168h, 90m or 1h30m: numbers, each with a unit of h, m, s, ms, us or ns (there is no d or w: a day is 24h, a week 168h)",
			bad.GetFlag().Name, bad.GetValue())
	}
	return err.Error()
}

// explicitNamespace is -n as given, or empty.
func (c *command) explicitNamespace() string {
	return c.cluster.ExplicitNamespace()
}

// client connects to the cluster of the kubeconfig flags and returns the
// namespace they select (-n, else the context's, else default).
func (c *command) client() (client.Client, string, error) {
	cfg, namespace, err := c.cluster.Config()
	if err != nil {
		return nil, "", err
	}
	// client-go's default (5 per second) is for controllers; create polls.
	cfg.QPS, cfg.Burst = 20, 40
	cl, err := NewClient(cfg)
	if err != nil {
		return nil, "", err
	}
	return cl, namespace, nil
}

// ExitStatus is the exit status err calls for (ExitCluster for errors of
// no known kind), and the message to print.
func ExitStatus(err error) (int, string) {
	var e *exitError
	if errors.As(err, &e) {
		return e.code, e.msg
	}
	return ExitCluster, err.Error()
}

// ClusterError is clusterError for callers outside this package.
func ClusterError(err error, verb, where string) error { return clusterError(err, verb, where) }

// clusterError explains an API error of verb (an RBAC verb: get, list,
// create, update) on shortlinks in where ("namespace x", "all namespaces").
// Errors it does not know are returned with the exit status of a cluster error.
func clusterError(err error, verb, where string) error {
	var status apierrors.APIStatus
	switch {
	case meta.IsNoMatchError(err) || isResourceNotFound(err):
		return clusterErrorf("%s", crdMissing)
	case apierrors.IsForbidden(err):
		return clusterErrorf("you may not %s %s in %s: %s\n"+
			"Ask a cluster admin for a Role that grants it (check with: kubectl auth can-i %s %s %s)",
			verb, resource, where, apiMessage(err), verb, resource, canINamespace(where))
	case apierrors.IsUnauthorized(err):
		return clusterErrorf("the cluster rejected your credentials (401 Unauthorized): log in again, or pick other credentials with --kubeconfig, --context or --user")
	case errors.As(err, &status):
		return clusterErrorf("%s %s in %s: %v", verb, resource, where, err)
	case isUnreachable(err):
		return clusterErrorf("cannot reach the cluster: %v (is it running? is --kubeconfig/--context the one you mean?)", err)
	}
	return clusterErrorf("%s %s in %s: %v", verb, resource, where, err)
}

// isResourceNotFound reports a 404 for the resource itself, not for one
// object: the API server has no shortlinks resource (the CRD was removed).
func isResourceNotFound(err error) bool {
	var status apierrors.APIStatus
	if !apierrors.IsNotFound(err) || !errors.As(err, &status) {
		return false
	}
	d := status.Status().Details
	return d == nil || d.Name == ""
}

func isUnreachable(err error) bool {
	var netErr net.Error
	var urlErr *url.Error
	return errors.As(err, &netErr) || errors.As(err, &urlErr)
}

// apiMessage is the API server's message of err.
func apiMessage(err error) string {
	var status apierrors.APIStatus
	if errors.As(err, &status) {
		return status.Status().Message
	}
	return err.Error()
}

func canINamespace(where string) string {
	if ns, ok := strings.CutPrefix(where, "namespace "); ok {
		return "-n " + ns
	}
	return "-A"
}

func inNamespace(ns string) string { return "namespace " + ns }
