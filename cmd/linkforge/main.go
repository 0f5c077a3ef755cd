// Command linkforge computes linkforge short codes offline, exactly as the
// operator does (the algorithm is documented in package internal/shortcode),
// imports links from other shorteners, and creates and shows ShortLinks in a
// cluster. Installed on the PATH as kubectl-linkforge it is a kubectl plugin:
// kubectl linkforge create ...
//
//	linkforge code [-n NAMESPACE] [--salt N] URL...
//	linkforge import FILE [--format F] [-n NAMESPACE] [--domain HOST=NAMESPACE]... [--name-prefix P] [--source NAME] [-o PATH | --apply [--overwrite]]
//	linkforge create NAME URL [--code C] [--ttl D | --expires-at T] [--max-uses N] [--status S] [--forward-query] [--dry-run=client -o yaml]
//	linkforge get [NAME] [-A]
//	linkforge open NAME [--browser]
//	linkforge qr NAME [-o FILE] [--format png|svg] [--size N] [--margin N]
//	linkforge rotate-peer-key [--previous-window 10m] [-n linkforge-system]
//	linkforge version
package main

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"os"

	"github.com/linkforge/linkforge/internal/plugin"
	"github.com/linkforge/linkforge/internal/shortcode"
)

// version is set at build time: -ldflags "-X main.version=v1.2.3".
var version = "dev"

const usage = `usage:
  linkforge code [-n NAMESPACE] [--salt N] URL...
        print "<code>\t<canonical URL>" for each URL
  linkforge import FILE [--format F] [-n NAMESPACE] [--domain HOST=NAMESPACE]...
        [--name-prefix P] [--source NAME] [--table T]
        [-o PATH | --apply [--overwrite] [--workers N] [--force-conflicts]]
        write ShortLink manifests for the links of a YOURLS, Shlink, Bitly, dub,
        Kutt or Sink export (or a CSV), or create them in the cluster; --apply
        changes no link it did not create unless --overwrite
  linkforge create NAME URL [--code C] [--ttl D | --expires-at T] [--max-uses N]
        [--status 301|302|307|308] [--forward-query] [--activates-at T]
        [--dedup-policy IfSameTarget|Never] [--rule 'url=URL COND...']...
        [--variant 'url=URL weight=N']... [--variants-end 'at=TIME url=URL']
        [--expired-url URL] [--forward-path]
        [--card-title TEXT] [--card-description TEXT] [--card-image URL]
        [--password-prompt | --password-hash HASH] [--allow-user U]... [--allow-group G]...
        [--overwrite] [--timeout 30s] [--dry-run=client|server [-o yaml|json]]
        create the ShortLink, wait until it is Ready and print its short URL
  linkforge get [NAME] [-A]
        show ShortLinks: short URL, code, target, uses/limit, expiry, state
  linkforge open NAME [--browser]
        print (and open) the short URL of a ShortLink
  linkforge qr NAME [-o FILE] [--format png|svg] [--size 256] [--margin 4] [--invert]
        [--base-url URL]
        draw a QR code of the short URL: in the terminal, or as a PNG or SVG
  linkforge rotate-peer-key [--previous-window 10m] [--secret NAME] [-n linkforge-system]
        replace the redirectors' peer key; they load it without a restart
  linkforge version
        print the version

create, get, open, qr and rotate-peer-key talk to the cluster of the kubeconfig and take kubectl's
flags (--kubeconfig, --context, -n...). Installed on the PATH as
kubectl-linkforge, the binary is a kubectl plugin: kubectl linkforge get.
Exit status: 0 ok, 1 invalid URL, conflict or not Ready, 2 usage error,
3 cluster error (no CRD, no permission, unreachable), 4 import --apply left
links it did not create as they are (and nothing else went wrong).
`

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run is the whole CLI; it returns the exit status: 0 success, 1 an invalid
// URL (or an import row skipped, or a link not Ready), 2 a usage error, 3 a
// cluster error (package plugin).
func run(args []string, stdout, stderr io.Writer) int {
	if len(args) == 0 {
		_, _ = fmt.Fprint(stderr, usage)
		return 2
	}
	switch args[0] {
	case "code":
		return runCode(args[1:], stdout, stderr)
	case "import":
		return runImport(args[1:], stdout, stderr)
	case "create", "get", "open", "qr", "rotate-peer-key":
		return plugin.Run(args[0], args[1:], stdout, stderr)
	case "version":
		if len(args) > 1 {
			_, _ = fmt.Fprint(stderr, "linkforge version takes no arguments\n"+usage)
			return 2
		}
		_, _ = fmt.Fprintln(stdout, version)
		return 0
	case "help", "-h", "-help", "--help":
		_, _ = fmt.Fprint(stderr, usage)
		return 0
	default:
		_, _ = fmt.Fprintf(stderr, "unknown command %q\n%s", args[0], usage)
		return 2
	}
}

func runCode(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("linkforge code", flag.ContinueOnError)
	fs.SetOutput(stderr)
	namespace := "default"
	fs.StringVar(&namespace, "n", namespace, "namespace the code is computed in")
	fs.StringVar(&namespace, "namespace", namespace, "same as -n")
	salt := fs.Int("salt", 0, fmt.Sprintf("retry salt, 0-%d", shortcode.MaxSalt))
	fs.Usage = func() {
		_, _ = fmt.Fprint(stderr, "usage: linkforge code [-n NAMESPACE] [--salt N] URL...\n\nPrints \"<code>\\t<canonical URL>\" for each URL.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2 // the flag package has printed the error and the usage
	}
	if *salt < 0 || *salt > shortcode.MaxSalt {
		_, _ = fmt.Fprintf(stderr, "invalid --salt %d: must be 0-%d\n", *salt, shortcode.MaxSalt)
		fs.Usage()
		return 2
	}
	if namespace == "" {
		_, _ = fmt.Fprintln(stderr, "invalid -n: the namespace must not be empty")
		fs.Usage()
		return 2
	}
	if fs.NArg() == 0 {
		_, _ = fmt.Fprintln(stderr, "no URL given")
		fs.Usage()
		return 2
	}

	status := 0
	for _, raw := range fs.Args() {
		canonical, err := shortcode.Canonicalize(raw)
		if err != nil {
			// %q keeps control characters of a bad URL off the terminal.
			_, _ = fmt.Fprintf(stderr, "invalid URL %q: %v\n", raw, err)
			status = 1
			continue
		}
		_, _ = fmt.Fprintf(stdout, "%s\t%s\n", shortcode.Code(canonical, namespace, *salt), canonical)
	}
	return status
}
