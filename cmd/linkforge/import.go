package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/linkforge/linkforge/internal/importer"
)

// stdin and now are variables so that tests can replace them.
var (
	stdin io.Reader = os.Stdin
	now             = time.Now
)

const importUsage = `usage: linkforge import FILE [--format csv|yourls|shlink] [-n NAMESPACE] [--name-prefix P] [-o PATH]

Writes a ShortLink manifest for each link of FILE ("-" for standard input): a
linkforge CSV (url,code,expires,max_uses), a YOURLS export or a Shlink export.
Rows that cannot be imported are reported here with their line (or JSON index)
and skipped; the exit status is then 1.

`

func runImport(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("linkforge import", flag.ContinueOnError)
	fs.SetOutput(stderr)
	format := fs.String("format", "", "input format: csv, yourls or shlink (default: guessed from the content)")
	var namespace string
	fs.StringVar(&namespace, "n", "", "namespace of the manifests (default: none; kubectl's namespace applies)")
	fs.StringVar(&namespace, "namespace", "", "same as -n")
	namePrefix := fs.String("name-prefix", "", "prefix of every manifest's name, e.g. yourls-")
	output := fs.String("o", "", "output: a file (all manifests), or a directory (existing, or a path ending in /) for one file per link (default: standard output)")
	fs.Usage = func() {
		_, _ = fmt.Fprint(stderr, importUsage)
		fs.PrintDefaults()
	}

	// The flag package stops at the first argument that is not a flag, and
	// the usage puts FILE first: parse again after each argument.
	var files []string
	for rest := args; ; {
		if err := fs.Parse(rest); err != nil {
			if errors.Is(err, flag.ErrHelp) {
				return 0
			}
			return 2 // the flag package has printed the error and the usage
		}
		if fs.NArg() == 0 {
			break
		}
		files = append(files, fs.Arg(0))
		rest = fs.Args()[1:]
	}
	if len(files) != 1 {
		_, _ = fmt.Fprintf(stderr, "linkforge import takes one FILE (or - for standard input), got %d\n", len(files))
		fs.Usage()
		return 2
	}
	file := files[0]
	if *format != "" && !knownFormat(importer.Format(*format)) {
		_, _ = fmt.Fprintf(stderr, "invalid --format %q: use csv, yourls or shlink, or leave it out to guess from the content\n", *format)
		return 2
	}
	if namespace != "" {
		if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
			_, _ = fmt.Fprintf(stderr, "invalid -n %q: %s\n", namespace, strings.Join(errs, "; "))
			return 2
		}
	}
	if err := importer.ValidateNamePrefix(*namePrefix); err != nil {
		_, _ = fmt.Fprintf(stderr, "invalid --name-prefix: %v\n", err)
		return 2
	}

	source := file
	var data []byte
	var err error
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

	result, err := importer.Parse(data, importer.Format(*format), now())
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

func knownFormat(format importer.Format) bool {
	for _, f := range importer.Formats {
		if f == format {
			return true
		}
	}
	return false
}

// writeManifests writes to stdout (output ""), to one multi-document file,
// or to a directory as NAME.yaml per manifest, and says where it wrote.
// Files of the same name are overwritten, so that an import can be re-run.
func writeManifests(manifests []importer.Manifest, output string, stdout io.Writer) (string, error) {
	if output != "" && (strings.HasSuffix(output, "/") || isDir(output)) {
		if err := os.MkdirAll(output, 0o755); err != nil {
			return "", err
		}
		for _, m := range manifests {
			doc, err := m.YAML()
			if err != nil {
				return "", err
			}
			if err := os.WriteFile(filepath.Join(output, m.Metadata.Name+".yaml"), doc, 0o644); err != nil {
				return "", err
			}
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
