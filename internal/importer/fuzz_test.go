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
	r := csv.NewReader(bytes.NewReader(bytes.TrimPrefix(data, utf8BOM)))
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
