package importer

import (
	"bytes"
	"encoding/csv"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/linkforge/linkforge/internal/shortcode"
)

// FuzzParseCSV checks the CSV reader's promise: it never panics, and every
// data row that holds anything becomes either a Link or a RowError; a CSV
// syntax error is one RowError for itself and the rest of the file.
func FuzzParseCSV(f *testing.F) {
	for _, name := range []string{"links.csv", "reordered.csv"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Add([]byte("url\n\"https://example.com/\n\"x\n"))
	f.Add([]byte("\ufeffURL,Max_Uses\r\nhttps://example.com/,1\r\n,\r\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		result, err := Parse(data, Options{Format: FormatCSV, Now: testNow})
		if err != nil {
			return // an unreadable header: nothing was imported, and the error says why
		}
		want, syntaxError := countCSVRows(data)
		if syntaxError {
			want++
		}
		if got := len(result.Links) + len(result.Skipped); got != want {
			t.Fatalf("%d links + %d skipped, want %d rows accounted for\ninput %q\nskipped %v", len(result.Links), len(result.Skipped), want, data, result.Skipped)
		}
		codes := map[string]bool{}
		for _, link := range result.Links {
			if _, err := shortcode.Canonicalize(link.URL); err != nil {
				t.Fatalf("imported an invalid URL %q: %v", link.URL, err)
			}
			if link.Code != "" && (!codePattern.MatchString(link.Code) || codes[link.Code]) {
				t.Fatalf("imported a bad or duplicate code %q", link.Code)
			}
			codes[link.Code] = true
			if link.MaxUses != nil && *link.MaxUses < 1 {
				t.Fatalf("imported maxUses %d", *link.MaxUses)
			}
			if link.ExpiresAt != nil && !link.ExpiresAt.After(testNow) {
				t.Fatalf("imported an expired link: %v", link.ExpiresAt)
			}
		}
		for _, skipped := range result.Skipped {
			if skipped.Reason == "" || skipped.Position.Line < 1 {
				t.Fatalf("skipped row without a reason or a line: %+v", skipped)
			}
		}
		if _, err := Manifests(result.Links, "ns", "p-"); err != nil {
			t.Fatalf("Manifests: %v", err)
		}
	})
}

// countCSVRows counts the data rows with a non-empty cell, independently of
// the parser, and whether reading stopped at a syntax error.
func countCSVRows(data []byte) (rows int, syntaxError bool) {
	data = bytes.TrimPrefix(data, utf8BOM)
	r := csv.NewReader(bytes.NewReader(data))
	r.Comma = sniffDelimiter(data) // ',' ';' or tab, as the header says
	r.FieldsPerRecord = -1
	if _, err := r.Read(); err != nil {
		return 0, false
	}
	for {
		record, err := r.Read()
		if errors.Is(err, io.EOF) {
			return rows, false
		}
		if err != nil {
			return rows, true
		}
		if strings.TrimSpace(strings.Join(record, "")) != "" {
			rows++
		}
	}
}

// checkResult holds any result to the importer's promises: every link is
// one the API accepts, codes are unique per namespace, every skip has a
// position and a reason, and the manifests can be written.
func checkResult(t *testing.T, data []byte, result *Result) {
	t.Helper()
	codes := map[string]bool{}
	for _, link := range result.Links {
		if _, err := shortcode.Canonicalize(link.URL); err != nil {
			t.Fatalf("imported an invalid URL %q: %v\ninput %q", link.URL, err, data)
		}
		key := link.Namespace + "/" + link.Code
		if link.Code != "" && (!codePattern.MatchString(link.Code) || codes[key]) {
			t.Fatalf("imported a bad or duplicate code %q\ninput %q", link.Code, data)
		}
		codes[key] = true
		if link.MaxUses != nil && *link.MaxUses < 1 {
			t.Fatalf("imported maxUses %d", *link.MaxUses)
		}
		if link.ExpiresAt != nil && !link.ExpiresAt.After(testNow) {
			t.Fatalf("imported an expired link: %v", link.ExpiresAt)
		}
		for key := range link.Labels {
			if errs := validation.IsQualifiedName(key); len(errs) > 0 {
				t.Fatalf("label key %q: %v", key, errs)
			}
		}
	}
	for _, skipped := range result.Skipped {
		if skipped.Reason == "" || skipped.Position.String() == "line 0" || skipped.Position.String() == "" {
			t.Fatalf("skipped row without a reason or a position: %+v\ninput %q", skipped, data)
		}
	}
	if _, err := Manifests(result.Links, "ns", "p-"); err != nil {
		t.Fatalf("Manifests: %v\ninput %q", err, data)
	}
}

// FuzzSQLDump feeds the MySQL dump reader arbitrary bytes: it must not
// panic or loop, and what it imports must hold to checkResult.
func FuzzSQLDump(f *testing.F) {
	for _, name := range []string{"yourls-phpmyadmin.sql", "yourls-mysqldump.sql", "yourls-navicat.sql"} {
		data, err := os.ReadFile(filepath.Join("testdata", name))
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	for _, seed := range []string{
		"INSERT INTO yourls_url VALUES ('a\\'b','https://example.com/','',NOW(),'',0x4);",
		"INSERT INTO `a`.`x_url` (`keyword`,`url`) VALUES (_utf8mb4'k' COLLATE utf8mb4_bin,X'6869'),('b',\"c\");",
		"/*!40101 SET x=1 */; -- c\n# d\nCREATE TABLE t (`keyword` int, PRIMARY KEY (`keyword`)); INSERT INTO t VALUES (-1,+2.5e-3);",
		"INSERT INTO u_url VALUES ('x','y'",
		"'", "`", "/*", "0x", "X'", "N'",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		result, err := Parse(data, Options{Format: FormatYOURLSSQL, Now: testNow})
		if err != nil {
			return // no YOURLS table: the error says what the dump has
		}
		checkResult(t, data, result)
	})
}

// FuzzSQLLexer: every token moves forward, so no input makes the lexer
// stall, and the input ends in EOF or an error.
func FuzzSQLLexer(f *testing.F) {
	f.Add([]byte("INSERT INTO `t` VALUES ('a\\'',0x1F,X'00',\"b\"\"\",-- c\n1);"))
	f.Add([]byte("/* x */ # y\n-- z"))
	f.Fuzz(func(t *testing.T, data []byte) {
		l := newSQLLexer(bytes.NewReader(data))
		for steps := 0; ; steps++ {
			before := l.offset
			tok, err := l.next()
			if err != nil || tok.kind == sqlEOF {
				return
			}
			if l.offset <= before {
				t.Fatalf("token %+v at %d did not move the lexer", tok, before)
			}
			if steps > len(data) {
				t.Fatalf("more tokens than bytes")
			}
		}
	})
}

// FuzzParseAny: whatever the bytes, detection and every reader keep the
// importer's promises.
func FuzzParseAny(f *testing.F) {
	files, err := filepath.Glob(filepath.Join("testdata", "*"))
	if err != nil {
		f.Fatal(err)
	}
	for _, file := range files {
		data, err := os.ReadFile(file)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(data)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		result, err := Parse(data, Options{Now: testNow, Domains: map[string]string{"s.test": "team-a"}})
		if err != nil {
			return
		}
		checkResult(t, data, result)
	})
}
