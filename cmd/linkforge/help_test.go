package main

import (
	"bytes"
	"os"
	"regexp"
	"strings"
	"testing"
)

// verbFlag finds a flag's name at the start of a line of a verb's --help:
// pflag's "  -o, --output string" and Go flag's "  -salt int".
var verbFlag = regexp.MustCompile(`(?m)^\s+(?:-(\w), )?--?([a-z][a-z-]*)`)

// kubectlFlags are kubectl's own flags, which create, get, open, qr and
// import take as kubectl does: kubectl documents them.
var kubectlFlags = map[string]bool{
	"as": true, "as-group": true, "as-uid": true, "certificate-authority": true, "client-certificate": true,
	"client-key": true, "cluster": true, "context": true, "disable-compression": true,
	"insecure-skip-tls-verify": true, "kubeconfig": true, "namespace": true, "proxy-url": true,
	"request-timeout": true, "server": true, "tls-server-name": true, "token": true, "user": true,
}

// mentions reports whether text names the flag, long or short.
func mentions(text, short, long string) bool {
	if strings.Contains(text, "--"+long) || strings.Contains(text, " -"+long+" ") {
		return true
	}
	return short != "" && (strings.Contains(text, "-"+short+" ") || strings.Contains(text, "-"+short+"]"))
}

// TestEveryFlagIsDocumented: every flag a verb's --help lists is in the
// top-level usage and in docs/cli.md, and so is every verb, so that neither
// falls behind the flags that exist (issue 54).
func TestEveryFlagIsDocumented(t *testing.T) {
	doc, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, verb := range []string{"code", "import", "create", "get", "open", "qr", "version"} {
		if !strings.Contains(usage, "linkforge "+verb) {
			t.Errorf("the top-level usage has no %q", "linkforge "+verb)
		}
		if !strings.Contains(string(doc), "linkforge "+verb) {
			t.Errorf("docs/cli.md has no %q", "linkforge "+verb)
		}
		if verb == "version" {
			continue
		}
		var stdout, stderr bytes.Buffer
		run([]string{verb, "--help"}, &stdout, &stderr)
		help := stderr.String() + stdout.String()
		// kubectl's own flags come last and are kubectl's to document.
		help, _, _ = strings.Cut(help, "Kubeconfig flags")
		flags := verbFlag.FindAllStringSubmatch(help, -1)
		if len(flags) == 0 {
			t.Fatalf("%s --help lists no flags:\n%s", verb, help)
		}
		for _, f := range flags {
			short, name := f[1], f[2]
			if kubectlFlags[name] {
				continue
			}
			if !mentions(usage, short, name) {
				t.Errorf("%s --%s: not in the top-level usage", verb, name)
			}
			if !mentions(string(doc), short, name) {
				t.Errorf("%s --%s: not in docs/cli.md", verb, name)
			}
		}
	}
}
