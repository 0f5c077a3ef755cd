package main

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"
)

const fixtures = "../../internal/importer/testdata/"

func sha256Sum(s string) []byte {
	sum := sha256.Sum256([]byte(s))
	return sum[:]
}

// sha256Prefix is the hash part of the default source of file.
func sha256Prefix(t *testing.T, file string) string {
	t.Helper()
	data, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(sha256Sum(string(data))[:8])
}

// fixNow pins the clock of the import: the fixtures' expiries are judged
// against 2026-06-01.
func fixNow(t *testing.T) {
	t.Helper()
	saved := now
	now = func() time.Time { return time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC) }
	t.Cleanup(func() { now = saved })
}

func TestImportReportsSkippedRowsAndWritesTheRest(t *testing.T) {
	fixNow(t)
	out := filepath.Join(t.TempDir(), "links.yaml")
	var stdout, stderr bytes.Buffer
	code := run([]string{"import", fixtures + "links.csv", "-n", "team-a", "--name-prefix", "csv-", "-o", out}, &stdout, &stderr)
	if code != 1 {
		t.Errorf("exit status %d, want 1 (rows were skipped)", code)
	}
	if stdout.Len() != 0 {
		t.Errorf("stdout %q, want nothing: -o was given", stdout.String())
	}
	src := fixtures + "links.csv"
	wantStderr := src + `: line 6: skipped: invalid url "ftp://example.com/file": scheme: scheme "ftp" is not allowed; use http or https
` + src + `: line 7: skipped: invalid code "bad code!": a code is 1-64 characters of A-Z a-z 0-9 _ -
` + src + `: line 8: skipped: invalid expires "next tuesday": want an RFC 3339 time such as 2026-12-31T23:59:59Z
` + src + `: line 9: skipped: invalid max_uses "0": a whole number of at least 1; leave it empty for no limit
` + src + `: line 10: skipped: duplicate code "docs": line 2 already has it; a code is unique in a namespace
` + src + `: line 11: skipped: the row has 2 cell(s) but the header has 4 column(s) ["url" "code" "expires" "max_uses"]: add the missing cells (empty means unset) or remove the extra ones
` + src + `: line 12: skipped: already expired: expires 2020-01-01T00:00:00Z is in the past; only live links are imported
linkforge import: 5 ShortLink(s) from ` + src + ` (csv) written to ` + out + `; 7 row(s) skipped
`
	if stderr.String() != wantStderr {
		t.Errorf("stderr:\n%s\nwant:\n%s", stderr.String(), wantStderr)
	}
	data, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	docs := strings.Split(string(data), "---\n")
	if len(docs) != 5 {
		t.Fatalf("%d documents in %s, want 5:\n%s", len(docs), out, data)
	}
	wantFirst := `apiVersion: linkforge.io/v1alpha1
kind: ShortLink
metadata:
  annotations:
    linkforge.io/import-source: links.csv@sha256:` + sha256Prefix(t, src) + `
  name: csv-docs
  namespace: team-a
spec:
  code: docs
  url: https://example.com/docs
`
	if docs[0] != wantFirst {
		t.Errorf("first document:\n%s\nwant:\n%s", docs[0], wantFirst)
	}
	if !strings.Contains(docs[1], "name: csv-launch-") || !strings.Contains(docs[1], "maxUses: 100") || !strings.Contains(docs[1], `expiresAt: "2027-01-01T00:00:00Z"`) {
		t.Errorf("second document lacks the name, maxUses or expiresAt of Launch:\n%s", docs[1])
	}
}

func TestImportToDirectory(t *testing.T) {
	fixNow(t)
	dir := filepath.Join(t.TempDir(), "links") + "/" // does not exist yet: the / says it is a directory
	var stdout, stderr bytes.Buffer
	// Flags after FILE, as in the usage line.
	code := run([]string{"import", fixtures + "shlink.json", "-o", dir, "--name-prefix", "shlink-"}, &stdout, &stderr)
	if code != 1 {
		t.Errorf("exit status %d, want 1 (stderr %q)", code, stderr.String())
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	if len(names) != 3 || !strings.HasPrefix(names[0], "shlink-12c18-") || names[1] != "shlink-later.yaml" || names[2] != "shlink-old-api.yaml" {
		t.Fatalf("files %q, want shlink-12c18-<hash>.yaml, shlink-later.yaml and shlink-old-api.yaml", names)
	}
	later, err := os.ReadFile(filepath.Join(dir, "shlink-later.yaml"))
	if err != nil || !strings.Contains(string(later), `activatesAt: "2030-01-01T00:00:00Z"`) {
		t.Errorf("shlink-later.yaml (validSince to come) lacks activatesAt: %v\n%s", err, later)
	}
	data, err := os.ReadFile(filepath.Join(dir, names[0]))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"code: 12C18", "maxUses: 60", "forwardQuery: true", `expiresAt: "2027-01-01T00:00:00Z"`} {
		if !strings.Contains(string(data), want) {
			t.Errorf("%s lacks %q:\n%s", names[0], want, data)
		}
	}
	for _, want := range []string{
		"shlink.json: shortUrls.data[2]: skipped: already exhausted: meta.maxVisits 10 and 10 visits counted",
		"shlink.json: shortUrls.data[10]: skipped: duplicate shortCode \"12C18\": shortUrls.data[0] already has it",
		"3 ShortLink(s) from " + fixtures + "shlink.json (shlink-api) written to directory " + dir + "; 9 row(s) skipped",
	} {
		if !strings.Contains(stderr.String(), want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr.String())
		}
	}
}

func TestImport(t *testing.T) {
	fixNow(t)
	existingDir := t.TempDir()
	tests := []struct {
		name       string
		args       []string
		stdin      string
		wantCode   int
		wantStdout string
		wantStderr []string // substrings
		wantFiles  []string // in existingDir
	}{
		{
			name:  "stdin to stdout, all valid",
			args:  []string{"import", "-"},
			stdin: "code,url\nhi,https://example.com/\n",
			wantStdout: `apiVersion: linkforge.io/v1alpha1
kind: ShortLink
metadata:
  annotations:
    linkforge.io/import-source: stdin@sha256:` + hex.EncodeToString(sha256Sum("code,url\nhi,https://example.com/\n")[:8]) + `
  name: hi
spec:
  code: hi
  url: https://example.com/
`,
			wantStderr: []string{"linkforge import: 1 ShortLink(s) from stdin (csv) written to standard output; 0 row(s) skipped\n"},
		},
		{
			name:       "YOURLS to an existing directory",
			args:       []string{"import", "--format", "yourls", fixtures + "yourls.csv", "-o", existingDir},
			wantCode:   1,
			wantStderr: []string{"yourls.csv: line 5: skipped: invalid url \"javascript:alert(1)\"", "yourls.csv: line 8: skipped: keyword is empty"},
			wantFiles:  []string{"blog-" /* hash */, "gh.yaml", "ozh.yaml"},
		},
		{
			name:       "format given but wrong",
			args:       []string{"import", fixtures + "yourls.csv", "--format=csv"},
			wantCode:   1,
			wantStderr: []string{`yourls.csv: unknown column(s) ["keyword" "title" "timestamp" "ip" "clicks"] in the header: the linkforge CSV columns are url, code, expires, max_uses`},
		},
		{
			name:       "cannot guess",
			args:       []string{"import", "-"},
			stdin:      "link,target\nx,y\n",
			wantCode:   1,
			wantStderr: []string{"stdin: cannot tell the format: tried XML, JSON, SQL and CSV", "pass --format"},
		},
		{name: "no file", args: []string{"import"}, wantCode: 2, wantStderr: []string{"takes one FILE", "See 'linkforge import --help' for usage."}},
		{name: "two files", args: []string{"import", "a.csv", "b.csv"}, wantCode: 2, wantStderr: []string{"got 2"}},
		{name: "bad format flag", args: []string{"import", "-", "--format", "bitlyx"}, wantCode: 2, wantStderr: []string{`invalid --format "bitlyx": use one of csv, yourls-sql,`}},
		{name: "bad domain flag", args: []string{"import", "-", "--domain", "s.test"}, wantCode: 2, wantStderr: []string{`invalid --domain "s.test": want HOST=NAMESPACE`}},
		{name: "domain to a bad namespace", args: []string{"import", "-", "--domain", "s.test=Team_A"}, wantCode: 2, wantStderr: []string{`invalid --domain "s.test=Team_A": namespace "Team_A"`}},
		{name: "one domain, two namespaces", args: []string{"import", "-", "--domain", "s.test=a", "--domain", "S.test=b"}, wantCode: 2, wantStderr: []string{"--domain s.test is given twice, for a and b"}},
		{name: "-o and --apply", args: []string{"import", "-", "--apply", "-o", "x.yaml"}, wantCode: 2, wantStderr: []string{"pass one of them"}},
		{name: "--workers without --apply", args: []string{"import", "-", "--workers", "4"}, wantCode: 2, wantStderr: []string{"--workers, --overwrite and --force-conflicts go with --apply"}},
		{name: "--overwrite without --apply", args: []string{"import", "-", "--overwrite"}, wantCode: 2, wantStderr: []string{"--workers, --overwrite and --force-conflicts go with --apply"}},
		{name: "bad source", args: []string{"import", "-", "--source", "my links"}, wantCode: 2, wantStderr: []string{`invalid --source: invalid source "my links": 1-253 of`}},
		{name: "empty source", args: []string{"import", "-", "--source="}, wantCode: 2, wantStderr: []string{`invalid --source: invalid source ""`}},
		{name: "--workers out of range", args: []string{"import", "-", "--apply", "--workers", "0"}, wantCode: 2, wantStderr: []string{"invalid --workers 0: 1-64"}},
		{name: "bad namespace", args: []string{"import", "-", "-n", "Team_A"}, wantCode: 2, wantStderr: []string{`invalid -n "Team_A"`}},
		{name: "bad prefix", args: []string{"import", "-", "--name-prefix", "Old_"}, wantCode: 2, wantStderr: []string{`invalid --name-prefix: invalid name prefix "Old_"`}},
		{name: "missing file", args: []string{"import", "does-not-exist.csv"}, wantCode: 1, wantStderr: []string{"does-not-exist.csv: no such file"}},
		{name: "help", args: []string{"import", "-h"}, wantStderr: []string{"usage: linkforge import", "-name-prefix"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			saved := stdin
			stdin = strings.NewReader(tc.stdin)
			defer func() { stdin = saved }()
			var stdout, stderr bytes.Buffer
			code := run(tc.args, &stdout, &stderr)
			if code != tc.wantCode {
				t.Errorf("exit status %d, want %d (stderr: %q)", code, tc.wantCode, stderr.String())
			}
			if stdout.String() != tc.wantStdout {
				t.Errorf("stdout = %q, want %q", stdout.String(), tc.wantStdout)
			}
			for _, want := range tc.wantStderr {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr = %q, want it to contain %q", stderr.String(), want)
				}
			}
			if tc.wantFiles != nil {
				entries, _ := os.ReadDir(existingDir)
				if len(entries) != len(tc.wantFiles) {
					t.Fatalf("%d files, want %d", len(entries), len(tc.wantFiles))
				}
				for i, e := range entries {
					if !strings.HasPrefix(e.Name(), tc.wantFiles[i]) {
						t.Errorf("file %d %q, want %q...", i, e.Name(), tc.wantFiles[i])
					}
				}
			}
		})
	}
}

// TestImportPrintsNoEscapes: what import writes to the terminal is
// escaped, whatever the file's name and content hold: no control character
// (but the newline ending each line) and no invisible rune reaches stderr.
func TestImportPrintsNoEscapes(t *testing.T) {
	fixNow(t)
	const hostile = "\x1b]0;pwned\a\x1b[2J\u009b1m\rX\u202e\xff"
	dir := t.TempDir()
	named := filepath.Join(dir, "links"+hostile+".csv")
	if err := os.WriteFile(named, []byte("url,code\nhttps://example.com/"+hostile+",a\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		args  []string
		stdin string
	}{
		{"a file name", []string{"import", named, "-o", filepath.Join(dir, "out.yaml")}, ""},
		{"a file that is not there", []string{"import", named + "x"}, ""},
		{"a column name", []string{"import", "-", "--format", "shlink"}, "Long URL,Short code,Tags" + hostile + "\nhttps://example.com/,a,x\n"},
		{"a code and a title", []string{"import", "-"}, "keyword,url,title\nk" + hostile + ",https://example.com/,t" + hostile + "\n"},
		{"a short domain", []string{"import", "-"}, "Long URL,Short code,Domain\nhttps://example.com/,a,s" + hostile + "\nhttps://example.com/b,b,s" + hostile + "\n"},
		{"an SQL table", []string{"import", "-"}, "INSERT INTO `t" + hostile + "url` VALUES ('a','https://example.com/');\nINSERT INTO log VALUES (1);"},
		{"the header of an unknown format", []string{"import", "-"}, "a" + hostile + ",b\n1,2\n"},
		{"a usage error", []string{"import", "-", "--table"}, ""},
		{"a flag", []string{"import", "-", "--domain", hostile}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			saved := stdin
			stdin = strings.NewReader(tc.stdin)
			defer func() { stdin = saved }()
			var stdout, stderr bytes.Buffer
			run(tc.args, &stdout, &stderr)
			if stderr.Len() == 0 {
				t.Fatal("nothing written: the case tests nothing")
			}
			out := stderr.String()
			for i := 0; i < len(out); {
				r, size := utf8.DecodeRuneInString(out[i:])
				if r == utf8.RuneError && size == 1 || r != '\n' && r != ' ' && !unicode.IsPrint(r) {
					t.Fatalf("stderr holds %q at %d:\n%q", out[i:i+size], i, out)
				}
				i += size
			}
		})
	}
}
