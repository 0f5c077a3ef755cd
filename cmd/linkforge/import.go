package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"golang.org/x/term"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/linkforge/linkforge/internal/importapply"
	"github.com/linkforge/linkforge/internal/importer"
	"github.com/linkforge/linkforge/internal/plugin"
)

// stdin, now and isTerminal are variables so that tests can replace them.
var (
	stdin      io.Reader = os.Stdin
	now                  = time.Now
	isTerminal           = func(w io.Writer) bool {
		f, ok := w.(*os.File)
		return ok && term.IsTerminal(int(f.Fd()))
	}
)

const importUsage = `usage: linkforge import FILE [--format F] [-n NAMESPACE] [--domain HOST=NAMESPACE]...
       [--name-prefix P] [-o PATH | --apply [--workers N] [--force-conflicts]]

Reads the links of FILE ("-" for standard input), an export of another
shortener or linkforge's CSV, and writes a ShortLink manifest for each, or
with --apply creates them in the cluster (server-side apply; re-running it
changes nothing). Rows that cannot be imported are reported with their line
(or JSON path) and skipped; the exit status is then 1. See docs/import.md.

Formats (--format takes one of these, or a family such as yourls or shlink;
without it the format is told from the content):
`

// importExit: 0 all imported, 1 a row skipped or a link refused, 2 usage,
// 3 the cluster (as the other verbs).
func runImport(args []string, stdout, stderr io.Writer) int {
	fs := pflag.NewFlagSet("linkforge import", pflag.ContinueOnError)
	fs.SetOutput(io.Discard)
	fs.SortFlags = false
	format := fs.String("format", "", "input format or family (default: told from the content)")
	var domains []string
	fs.StringArrayVar(&domains, "domain", nil, "put the links of short domain HOST in NAMESPACE (repeatable); links of other domains are reported")
	namePrefix := fs.String("name-prefix", "", "prefix of every manifest's name, e.g. yourls-")
	table := fs.String("table", "", "the YOURLS URL table of an SQL dump that holds several (e.g. blog_url)")
	output := fs.StringP("output", "o", "", "output: a file (all manifests), or a directory (existing, or a path ending in /) for one file per link (default: standard output)")
	apply := fs.Bool("apply", false, "create the links in the cluster (server-side apply) instead of writing manifests")
	workers := fs.Int("workers", importapply.DefaultWorkers, fmt.Sprintf("with --apply: requests in flight at once, 1-%d", importapply.MaxWorkers))
	force := fs.Bool("force-conflicts", false, "with --apply: take over fields another manager owns (as kubectl apply --server-side --force-conflicts)")
	cluster := plugin.NewClusterFlags()
	fs.AddFlagSet(cluster.Flags)
	usage := func() {
		_, _ = fmt.Fprint(stderr, importUsage, importer.FormatHelp(), "\nFlags:\n", fs.FlagUsages())
	}
	usageError := func(format string, args ...any) int {
		_, _ = fmt.Fprintf(stderr, format+"\n", args...)
		_, _ = fmt.Fprintln(stderr, "See 'linkforge import --help' for usage.")
		return 2
	}

	if err := fs.Parse(args); err != nil {
		if errors.Is(err, pflag.ErrHelp) {
			usage()
			return 0
		}
		return usageError("%v", err)
	}
	if fs.NArg() != 1 {
		return usageError("linkforge import takes one FILE (or - for standard input), got %d", fs.NArg())
	}
	file := fs.Arg(0)
	if *format != "" && !importer.Known(*format) {
		return usageError("invalid --format %q: use one of %s, or leave it out to tell the format from the content", *format, importer.FormatNames())
	}
	namespace := cluster.ExplicitNamespace()
	if namespace != "" {
		if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
			return usageError("invalid -n %q: %s", namespace, strings.Join(errs, "; "))
		}
	}
	domainNamespaces, err := parseDomains(domains)
	if err != nil {
		return usageError("%v", err)
	}
	if err := importer.ValidateNamePrefix(*namePrefix); err != nil {
		return usageError("invalid --name-prefix: %v", err)
	}
	if *apply && *output != "" {
		return usageError("-o writes manifests and --apply creates the links: pass one of them")
	}
	if *workers < 1 || *workers > importapply.MaxWorkers {
		return usageError("invalid --workers %d: 1-%d", *workers, importapply.MaxWorkers)
	}
	if !*apply && (fs.Changed("workers") || *force) {
		return usageError("--workers and --force-conflicts go with --apply")
	}

	source := file
	var data []byte
	if file == "-" {
		source = "stdin"
		data, err = io.ReadAll(stdin)
	} else {
		data, err = os.ReadFile(file)
	}
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "linkforge import: %v\n", err)
		return 1
	}

	result, err := importer.Parse(data, importer.Options{
		Format:  importer.Format(*format),
		Now:     now(),
		Domains: domainNamespaces,
		Table:   *table,
	})
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "%s: %v\n", source, err)
		return 1
	}
	for _, note := range result.Notes {
		_, _ = fmt.Fprintf(stderr, "%s: note: %s\n", source, note)
	}
	for _, skipped := range result.Skipped {
		_, _ = fmt.Fprintf(stderr, "%s: %s: skipped: %s\n", source, skipped.Position, skipped.Reason)
	}
	for _, host := range usedDomains(result.Links) {
		ns := domainNamespaces[host]
		_, _ = fmt.Fprintf(stderr, "%s: note: links of %s go to namespace %s; for https://%s/<code> to keep working there: kubectl annotate namespace %s linkforge.io/domain=%s\n", source, host, ns, host, ns, host)
	}

	if *apply {
		return applyLinks(result, source, cluster, *namePrefix, importapply.Options{Workers: *workers, Force: *force}, stderr)
	}

	manifests, err := importer.Manifests(result.Links, namespace, *namePrefix)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "%s: %v\n", source, err)
		return 1
	}
	destination, err := writeManifests(manifests, *output, stdout)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "linkforge import: %v\n", err)
		return 1
	}
	_, _ = fmt.Fprintf(stderr, "linkforge import: %d ShortLink(s) from %s (%s) written to %s; %d row(s) skipped\n",
		len(manifests), source, result.Format, destination, len(result.Skipped))
	if len(result.Skipped) > 0 {
		return 1
	}
	return 0
}

// applyLinks creates the links in the cluster of the kubeconfig flags, in
// -n (else the context's namespace) or the namespace --domain gave them.
func applyLinks(result *importer.Result, source string, cluster *plugin.ClusterFlags, prefix string, opts importapply.Options, stderr io.Writer) int {
	cfg, namespace, err := cluster.Config()
	if err != nil {
		code, msg := plugin.ExitStatus(err)
		_, _ = fmt.Fprintf(stderr, "linkforge import: %s\n", msg)
		return code
	}
	// The workers bound the requests in flight; the API server's priority
	// and fairness queues them against other clients. A client-side rate
	// limit would only idle the workers.
	cfg.QPS = -1
	cl, err := plugin.NewClient(cfg)
	if err != nil {
		code, msg := plugin.ExitStatus(err)
		_, _ = fmt.Fprintf(stderr, "linkforge import: %s\n", msg)
		return code
	}
	manifests, err := importer.Manifests(result.Links, namespace, prefix)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "%s: %v\n", source, err)
		return 1
	}
	if isTerminal(stderr) {
		opts.Progress = stderr
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	summary, err := importapply.Apply(ctx, cl, manifests, opts)
	if err != nil {
		_, _ = fmt.Fprintf(stderr, "linkforge import: %v\n", err)
		if ctx.Err() != nil {
			return 1
		}
		return plugin.ExitCluster
	}
	for _, f := range summary.Failed {
		_, _ = fmt.Fprintf(stderr, "%s: %s: not applied: ShortLink %s/%s: %v\n", source, result.Links[f.Index].Position, f.Manifest.Metadata.Namespace, f.Manifest.Metadata.Name, f.Err)
	}
	counts := fmt.Sprintf("%d created, %d updated, %d unchanged", summary.Created, summary.Updated, summary.Unchanged)
	if summary.Applied > 0 {
		counts = fmt.Sprintf("%d applied (no permission to list ShortLinks, so new and changed ones are not told apart)", summary.Applied)
	}
	_, _ = fmt.Fprintf(stderr, "linkforge import: %d ShortLink(s) from %s (%s) applied in %s: %s, %d failed; %d row(s) skipped\n",
		len(manifests), source, result.Format, summary.Elapsed.Round(10*time.Millisecond), counts, len(summary.Failed), len(result.Skipped))
	if len(summary.Failed) > 0 || len(result.Skipped) > 0 {
		return 1
	}
	return 0
}

// parseDomains reads --domain HOST=NAMESPACE flags.
func parseDomains(flags []string) (map[string]string, error) {
	domains := map[string]string{}
	for _, flag := range flags {
		host, ns, ok := strings.Cut(flag, "=")
		host = strings.ToLower(strings.TrimSpace(host))
		if !ok || host == "" || ns == "" {
			return nil, fmt.Errorf("invalid --domain %q: want HOST=NAMESPACE, e.g. --domain s.test=team-a", flag)
		}
		if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
			return nil, fmt.Errorf("invalid --domain %q: namespace %q: %s", flag, ns, strings.Join(errs, "; "))
		}
		if earlier, dup := domains[host]; dup && earlier != ns {
			return nil, fmt.Errorf("--domain %s is given twice, for %s and %s: a domain's links go to one namespace", host, earlier, ns)
		}
		domains[host] = ns
	}
	return domains, nil
}

// usedDomains lists the mapped domains that have links, in input order.
func usedDomains(links []importer.Link) []string {
	var hosts []string
	seen := map[string]bool{}
	for _, l := range links {
		if l.Namespace != "" && !seen[l.Domain] {
			seen[l.Domain] = true
			hosts = append(hosts, l.Domain)
		}
	}
	return hosts
}

// writeManifests writes to stdout (output ""), to one multi-document file,
// or to a directory as NAME.yaml per manifest (NAMESPACE/NAME.yaml when
// --domain spreads them over namespaces), and says where it wrote. Files of
// the same name are overwritten, so that an import can be re-run.
func writeManifests(manifests []importer.Manifest, output string, stdout io.Writer) (string, error) {
	if output != "" && (strings.HasSuffix(output, "/") || isDir(output)) {
		perNamespace := map[string]bool{}
		for _, m := range manifests {
			perNamespace[m.Metadata.Namespace] = true
		}
		for _, m := range manifests {
			doc, err := m.YAML()
			if err != nil {
				return "", err
			}
			dir := output
			if len(perNamespace) > 1 {
				dir = filepath.Join(output, m.Metadata.Namespace)
			}
			if err := os.MkdirAll(dir, 0o755); err != nil {
				return "", err
			}
			if err := os.WriteFile(filepath.Join(dir, m.Metadata.Name+".yaml"), doc, 0o644); err != nil {
				return "", err
			}
		}
		if err := os.MkdirAll(output, 0o755); err != nil {
			return "", err
		}
		return "directory " + output, nil
	}

	var all bytes.Buffer
	for i, m := range manifests {
		doc, err := m.YAML()
		if err != nil {
			return "", err
		}
		if i > 0 {
			all.WriteString("---\n")
		}
		all.Write(doc)
	}
	if output == "" {
		_, err := stdout.Write(all.Bytes())
		return "standard output", err
	}
	return output, os.WriteFile(output, all.Bytes(), 0o644)
}

func isDir(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.IsDir()
}
