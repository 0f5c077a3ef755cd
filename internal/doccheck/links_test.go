package doccheck

import (
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
)

// root is the repository's top directory.
const root = "../.."

var (
	// link matches an inline Markdown link or image: [text](target).
	link = regexp.MustCompile(`!?\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	// heading matches an ATX heading.
	heading = regexp.MustCompile(`(?m)^#{1,6}\s+(.+?)\s*#*\s*$`)
	fence   = regexp.MustCompile("(?ms)^(```|~~~).*?^(```|~~~)")
)

// markdownFiles are README.md and every .md file under docs/.
func markdownFiles(t *testing.T) []string {
	t.Helper()
	files := []string{filepath.Join(root, "README.md")}
	err := filepath.WalkDir(filepath.Join(root, "docs"), func(p string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if !d.IsDir() && strings.HasSuffix(p, ".md") {
			files = append(files, p)
		}
		return nil
	})
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	return files
}

// anchors are the GitHub anchors of a Markdown file's headings.
func anchors(text string) map[string]bool {
	out := map[string]bool{}
	seen := map[string]int{}
	for _, m := range heading.FindAllStringSubmatch(fence.ReplaceAllString(text, ""), -1) {
		a := slug(m[1])
		if n := seen[a]; n > 0 {
			out[a+"-"+strconv.Itoa(n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// slug is GitHub's anchor of a heading: lower case, punctuation dropped,
// spaces to hyphens.
func slug(h string) string {
	h = regexp.MustCompile("`|\\*\\*|\\[|\\]\\([^)]*\\)").ReplaceAllString(h, "")
	var b strings.Builder
	for _, r := range strings.ToLower(h) {
		switch {
		case r == ' ':
			b.WriteByte('-')
		case r == '-' || r == '_' || r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r > 127:
			b.WriteRune(r)
		}
	}
	return b.String()
}

func TestRelativeLinksResolve(t *testing.T) {
	files := markdownFiles(t)
	if len(files) < 2 {
		t.Fatalf("found %d Markdown files; the test reads README.md and docs/", len(files))
	}
	checked := 0
	for _, f := range files {
		body, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		text := fence.ReplaceAllString(string(body), "")
		for _, m := range link.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			path, frag, _ := strings.Cut(target, "#")
			dest := f
			if path != "" {
				dest = filepath.Join(filepath.Dir(f), path)
				if _, err := os.Stat(dest); err != nil {
					t.Errorf("%s: link %q points nowhere (%s does not exist)", rel(f), target, rel(dest))
					continue
				}
			}
			checked++
			if frag == "" || !strings.HasSuffix(dest, ".md") {
				continue
			}
			destBody, err := os.ReadFile(dest)
			if err != nil {
				t.Errorf("%s: link %q: %v", rel(f), target, err)
				continue
			}
			if !anchors(string(destBody))[frag] {
				t.Errorf("%s: link %q names no heading of %s", rel(f), target, rel(dest))
			}
		}
	}
	t.Logf("%d relative links in %d files resolve", checked, len(files))
}

func rel(p string) string {
	if r, err := filepath.Rel(root, p); err == nil {
		return r
	}
	return p
}

// The checker itself: a broken link and a broken anchor are caught.
func TestCheckerCatchesBrokenLinks(t *testing.T) {
	if got := slug("Who holds a `code`?"); got != "who-holds-a-code" {
		t.Errorf("slug = %q", got)
	}
	a := anchors("# Title\n## Uses\n```\n# not a heading\n```\n## Uses\n")
	for _, want := range []string{"title", "uses", "uses-1"} {
		if !a[want] {
			t.Errorf("anchor %q missing from %v", want, a)
		}
	}
	if a["not-a-heading"] {
		t.Error("a line in a code block counted as a heading")
	}
	if m := link.FindAllStringSubmatch("see [x](docs/a.md#b) and ![i](img.png \"t\")", -1); len(m) != 2 || m[0][1] != "docs/a.md#b" || m[1][1] != "img.png" {
		t.Errorf("links found: %v", m)
	}
}
