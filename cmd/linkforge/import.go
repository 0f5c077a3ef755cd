package main

import (
	"bufio"
	"context"
	"crypto/sha256"
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
       [--name-prefix P] [--source NAME]
       [-o PATH | --apply [--overwrite] [--workers N] [--force-conflicts]]

Reads the links of FILE ("-" for standard input), an export of another
shortener or linkforge's CSV, and writes a ShortLink manifest for each, or
with --apply creates them in the cluster (server-side apply; re-running it
changes nothing). Each link records its source, the file's name and hash
(annotation linkforge.io/import-source); --apply changes only the links of
its own source: a link of the same name that another file or someone else
made is a conflict, reported with what would change and left as it is
unless --overwrite. Rows that cannot be imported are reported with their
line (or JSON path) and skipped. See docs/import.md.

Exit status: 0 all imported; 1 a row skipped or a link refused; 2 usage;
3 the cluster (no CRD, credentials, unreachable); 4 conflicts left as they
are, and nothing else wrong.

Formats (--format takes one of these, or a family such as yourls or shlink;
without it the format is told from the content):
`

// exitConflicts is the exit status of an --apply that left conflicts as
// they are and met nothing else: 0 all imported, 1 a row skipped or a link
// refused, 2 usage, 3 the cluster (as the other verbs), 4 conflicts.
const exitConflicts = 4

// say writes one line of a message to w, escaped: messages name files and
// echo the input and the cluster, and none of that may reach a terminal as
// escape sequences (importer.Printable).
func say(w io.Writer, format string, args ...any) {
	_, _ = io.WriteString(w, importer.Printable(fmt.Sprintf(format, args...))+"\n")
}

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
	sourceName := fs.String("source", "", "the source the links record (annotation linkforge.io/import-source); default FILE's name and hash, e.g. links.csv@sha256:0123456789abcdef. Name it (e.g. yourls-prod) to update the links of an earlier import of that name from a newer export")
	apply := fs.Bool("apply", false, "create the links in the cluster (server-side apply) instead of writing manifests")
	overwrite := fs.Bool("overwrite", false, "with --apply: also apply to links this import did not create (another source's, or made by hand), reporting each with its changes")
	workers := fs.Int("workers", importapply.DefaultWorkers, fmt.Sprintf("with --apply: requests in flight at once, 1-%d", importapply.MaxWorkers))
	force := fs.Bool("force-conflicts", false, "with --apply: take over fields another manager owns (as kubectl apply --server-side --force-conflicts)")
	cluster := plugin.NewClusterFlags()
	fs.AddFlagSet(cluster.Flags)
	usage := func() {
		_, _ = fmt.Fprint(stderr, importUsage, importer.FormatHelp(), "\nFlags:\n", fs.FlagUsages())
	}
	usageError := func(format string, args ...any) int {
		say(stderr, format, args...)
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
	if !*apply && (fs.Changed("workers") || *force || *overwrite) {
		return usageError("--workers, --overwrite and --force-conflicts go with --apply")
	}
	if fs.Changed("source") {
		if err := importer.ValidateSource(*sourceName); err != nil {
			return usageError("invalid --source: %v", err)
		}
	}

	result, origin, err := readInput(file, importer.Options{
		Format:  importer.Format(*format),
		Now:     now(),
		Domains: domainNamespaces,
		Table:   *table,
	}, *sourceName)
	source := file
	if file == "-" {
		source = "stdin"
	}
	if err != nil {
		say(stderr, "%s: %v", source, err)
		return 1
	}
	for _, note := range result.Notes {
		say(stderr, "%s: note: %s", source, note)
	}
	for _, skipped := range result.Skipped {
		say(stderr, "%s: %s: skipped: %s", source, skipped.Position, skipped.Reason)
	}
	for _, host := range usedDomains(result.Links) {
		ns := domainNamespaces[host]
		say(stderr, "%s: note: links of %s go to namespace %s; for https://%s/<code> to keep working there: kubectl annotate namespace %s linkforge.io/domain=%s", source, host, ns, host, ns, host)
	}

	if *apply {
		return applyLinks(result, source, origin, cluster, *namePrefix, importapply.Options{Workers: *workers, Force: *force, Overwrite: *overwrite}, stderr)
	}

	manifests, err := importer.Manifests(result.Links, namespace, *namePrefix)
	if err != nil {
		say(stderr, "%s: %v", source, err)
		return 1
	}
	manifests = importer.WithSource(manifests, origin)
	destination, err := writeManifests(manifests, *output, stdout)
	if err != nil {
		say(stderr, "linkforge import: %v", err)
		return 1
	}
	say(stderr, "linkforge import: %d ShortLink(s) from %s (%s) written to %s; %d row(s) skipped",
		len(manifests), source, result.Format, destination, len(result.Skipped))
	if len(result.Skipped) > 0 {
		return 1
	}
	return 0
}

// readInput reads FILE ("-": standard input) as it streams, and returns the
// source its links record: named (--source), else the file's name and the
// SHA-256 of its bytes.
func readInput(file string, opts importer.Options, named string) (*importer.Result, string, error) {
	in := stdin
	if file != "-" {
		f, err := os.Open(file)
		if err != nil {
			return nil, "", err
		}
		defer func() { _ = f.Close() }()
		in = f
	}
	hash := sha256.New()
	tee := io.TeeReader(in, hash)
	result, err := importer.Read(tee, opts)
	if err != nil {
		return nil, "", err
	}
	// The readers stop at the end of what they read; the hash is of the
	// whole file.
	if _, err := io.Copy(io.Discard, tee); err != nil {
		return nil, "", err
	}
	if named != "" {
		return result, named, nil
	}
	name := file
	if file == "-" {
		name = "stdin"
	}
	return result, importer.DefaultSource(name, hash.Sum(nil)), nil
}

// applyLinks creates the links in the cluster of the kubeconfig flags, in
// -n (else the context's namespace) or the namespace --domain gave them.
func applyLinks(result *importer.Result, source, origin string, cluster *plugin.ClusterFlags, prefix string, opts importapply.Options, stderr io.Writer) int {
	cfg, namespace, err := cluster.Config()
	if err != nil {
		code, msg := plugin.ExitStatus(err)
		say(stderr, "linkforge import: %s", msg)
		return code
	}
	// The workers bound the requests in flight; the API server's priority
	// and fairness queues them against other clients. A client-side rate
	// limit would only idle the workers.
	cfg.QPS = -1
	cl, err := plugin.NewClient(cfg)
	if err != nil {
		code, msg := plugin.ExitStatus(err)
		say(stderr, "linkforge import: %s", msg)
		return code
	}
	manifests, err := importer.Manifests(result.Links, namespace, prefix)
	if err != nil {
		say(stderr, "%s: %v", source, err)
		return 1
	}
	manifests = importer.WithSource(manifests, origin)
	if isTerminal(stderr) {
		opts.Progress = stderr
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	summary, err := importapply.Apply(ctx, cl, manifests, opts)
	if err != nil {
		say(stderr, "linkforge import: %v", err)
		if ctx.Err() != nil {
			return 1
		}
		return plugin.ExitCluster
	}
	for _, c := range summary.Conflicts {
		what := "conflict"
		if c.Overwritten {
			what = "overwritten"
		}
		say(stderr, "%s: %s: %s: %s", source, result.Links[c.Index].Position, what, c)
	}
	for _, f := range summary.Failed {
		say(stderr, "%s: %s: not applied: ShortLink %s/%s: %v", source, result.Links[f.Index].Position, f.Manifest.Metadata.Namespace, f.Manifest.Metadata.Name, f.Err)
	}
	counts := fmt.Sprintf("%d created, %d updated, %d unchanged", summary.Created, summary.Updated, summary.Unchanged)
	if summary.Applied > 0 {
		counts += fmt.Sprintf(", %d applied without being read (--overwrite; the import may not get or list ShortLinks)", summary.Applied)
	}
	if summary.Matching > 0 {
		counts += fmt.Sprintf(", %d already as the file has them (not created by this import: left as they are)", summary.Matching)
	}
	if summary.Overwritten > 0 {
		counts += fmt.Sprintf(", %d overwritten", summary.Overwritten)
	}
	say(stderr, "linkforge import: %d ShortLink(s) from %s (%s, source %s) applied in %s: %s, %d conflict(s) left as they are, %d failed; %d row(s) skipped",
		len(manifests), source, result.Format, origin, summary.Elapsed.Round(10*time.Millisecond), counts, summary.Skipped(), len(summary.Failed), len(result.Skipped))
	switch {
	case len(summary.Failed) > 0 || len(result.Skipped) > 0:
		return 1
	case summary.Skipped() > 0:
		say(stderr, "linkforge import: %d link(s) exist and were not created by this import (source %s): they were left as they are. Check the changes listed and pass --overwrite to apply them; or, if an earlier import of this source named it, pass the same --source", summary.Skipped(), origin)
		return exitConflicts
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

	w := stdout
	var f *os.File
	if output != "" {
		var err error
		if f, err = os.Create(output); err != nil {
			return "", err
		}
		w = f
	}
	buffered := bufio.NewWriter(w)
	err := func() error {
		for i, m := range manifests {
			doc, err := m.YAML()
			if err != nil {
				return err
			}
			if i > 0 {
				if _, err := buffered.WriteString("---\n"); err != nil {
					return err
				}
			}
			if _, err := buffered.Write(doc); err != nil {
				return err
			}
		}
		return buffered.Flush()
	}()
	if f != nil {
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		return output, err
	}
	return "standard output", err
}

func isDir(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.IsDir()
}
