package importer

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// testNow is the "now" of every test: expiries before it are in the past.
var testNow = time.Date(2026, 6, 1, 0, 0, 0, 0, time.UTC)

// summary is a Link in one line, so that a table can list what each row must become.
func summary(l Link) string {
	s := fmt.Sprintf("%s code=%q url=%s", l.Position, l.Code, l.URL)
	if l.ExpiresAt != nil {
		s += " expires=" + l.ExpiresAt.UTC().Format(time.RFC3339)
	}
	if l.ActivatesAt != nil {
		s += " activates=" + l.ActivatesAt.UTC().Format(time.RFC3339)
	}
	if l.MaxUses != nil {
		s += fmt.Sprintf(" maxUses=%d", *l.MaxUses)
	}
	if l.ForwardQuery {
		s += " forwardQuery"
	}
	return s
}

// skip is a wanted RowError: the exact position, and a part of the reason.
type skip struct {
	position string
	reason   string
}

func TestParseFixtures(t *testing.T) {
	tests := []struct {
		file        string
		format      Format // "" lets Parse guess
		wantFormat  Format
		wantLinks   []string
		wantSkipped []skip
		wantNotes   []string // substrings
	}{
		{
			file:       "links.csv",
			wantFormat: FormatCSV,
			wantLinks: []string{
				`line 2 code="docs" url=https://example.com/docs`,
				`line 3 code="Launch" url=https://example.com/launch expires=2027-01-01T00:00:00Z maxUses=100`,
				`line 4 code="launch" url=https://example.com/launch-lower expires=2027-01-01T10:00:00Z`,
				`line 5 code="" url=HTTPS://Example.com/no-code?b=2&a=1`,
				`line 14 code="quoted_Code" url=https://example.com/quoted,comma maxUses=5`,
			},
			wantSkipped: []skip{
				{"line 6", `invalid url "ftp://example.com/file": scheme: scheme "ftp" is not allowed`},
				{"line 7", `invalid code "bad code!": a code is 1-64 characters of A-Z a-z 0-9 _ -`},
				{"line 8", `invalid expires "next tuesday": want an RFC 3339 time`},
				{"line 9", `invalid max_uses "0": a whole number of at least 1`},
				{"line 10", `duplicate code "docs": line 2 already has it`},
				{"line 11", `the row has 2 cell(s) but the header has 4 column(s)`},
				{"line 12", `already expired: expires 2020-01-01T00:00:00Z is in the past`},
			},
		},
		{
			file:       "links.csv",
			format:     FormatCSV,
			wantFormat: FormatCSV,
			wantLinks:  []string{"line 2", "line 3", "line 4", "line 5", "line 14"}, // prefixes
			wantSkipped: []skip{
				{"line 6", ""}, {"line 7", ""}, {"line 8", ""}, {"line 9", ""}, {"line 10", ""}, {"line 11", ""}, {"line 12", ""},
			},
		},
		{
			file:       "reordered.csv",
			wantFormat: FormatCSV,
			wantLinks: []string{
				`line 2 code="first" url=https://example.com/first maxUses=3`,
				`line 3 code="" url=https://example.com/second`,
			},
		},
		{
			file:       "yourls.csv",
			wantFormat: FormatYOURLSTable,
			wantLinks: []string{
				`line 2 code="ozh" url=https://ozh.org/`,
				`line 3 code="gh" url=https://github.com/YOURLS/YOURLS`,
				`line 4 code="Blog" url=https://example.com/blog`,
			},
			wantSkipped: []skip{
				{"line 5", `invalid url "javascript:alert(1)": not an absolute URL`},
				{"line 6", `invalid keyword "a/b"`},
				{"line 7", `duplicate keyword "ozh": line 2 already has it`},
				// A YOURLS keyword is its code: without one the link would get
				// another code and old short URLs would break.
				{"line 8", `keyword is empty: a YOURLS link keeps its code`},
			},
		},
		{
			file:       "yourls.json",
			wantFormat: FormatYOURLSTable,
			wantLinks: []string{
				`[0] code="ozh" url=https://ozh.org/`,
				`[1] code="2024" url=https://example.com/2024`,
			},
			wantSkipped: []skip{
				{"[2]", `invalid url "https://user:secret@example.com/": userinfo`},
				{"[3]", `want a JSON object with keyword and url`},
				{"[4]", `keyword is a JSON array`},
				{"[5]", `url is empty`},
			},
		},
		{
			file:       "shlink.json",
			wantFormat: FormatShlinkAPI,
			wantLinks: []string{
				// maxVisits 100 with 40 visits counted: 60 uses are left.
				`shortUrls.data[0] code="12C18" url=https://store.example.com/product/123 expires=2027-01-01T00:00:00Z maxUses=60 forwardQuery`,
				`shortUrls.data[1] code="old-api" url=https://example.com/old-api maxUses=5`,
				// validSince still to come: spec.activatesAt.
				`shortUrls.data[3] code="later" url=https://example.com/later activates=2030-01-01T00:00:00Z`,
			},
			wantSkipped: []skip{
				{"shortUrls.data[2]", `already exhausted: meta.maxVisits 10 and 10 visits counted`},
				{"shortUrls.data[4]", `already expired: meta.validUntil 2025-01-01T00:00:00+00:00 is in the past`},
				{"shortUrls.data[5]", `invalid longUrl "https://": host`},
				{"shortUrls.data[6]", `invalid shortCode "blog/2024"`},
				{"shortUrls.data[7]", `invalid longUrl "42": not an absolute URL`},
				{"shortUrls.data[8]", `not a Shlink link: want a JSON object with shortCode and longUrl`},
				{"shortUrls.data[9]", `invalid meta.validUntil "someday"`},
				{"shortUrls.data[10]", `duplicate shortCode "12C18": shortUrls.data[0] already has it`},
				{"shortUrls.data[11]", `never valid: meta.validSince 2030-01-01T00:00:00+00:00 is not before meta.validUntil 2029-01-01T00:00:00+00:00`},
			},
		},
		{
			// The web client's export: domain is always set (the host of
			// shortUrl), so two links with one code on two domains collide
			// without --domain.
			file:       "shlink.csv",
			wantFormat: FormatShlinkExport,
			wantLinks: []string{
				`line 2 code="abc123" url=https://example.com/a`,
				`line 3 code="Docs_v2" url=https://example.com/docs/v2`,
			},
			wantSkipped: []skip{
				{"line 4", `duplicate shortCode "abc123": line 2 already has it; a code is unique in a namespace (links of different short domains go to different namespaces with --domain HOST=NAMESPACE)`},
				{"line 5", `invalid longUrl "example.com/no-scheme": not an absolute URL`},
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.file+"/"+string(tc.format), func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			result, err := Parse(data, Options{Format: tc.format, Now: testNow})
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if result.Format != tc.wantFormat {
				t.Errorf("format %q, want %q", result.Format, tc.wantFormat)
			}
			if len(result.Links) != len(tc.wantLinks) {
				t.Errorf("%d links, want %d", len(result.Links), len(tc.wantLinks))
			}
			for i, link := range result.Links {
				got := summary(link)
				if i < len(tc.wantLinks) && !strings.HasPrefix(got, tc.wantLinks[i]) {
					t.Errorf("link %d:\n got %s\nwant %s", i, got, tc.wantLinks[i])
				}
				// Prefix matching must not hide extra fields of a full summary.
				if i < len(tc.wantLinks) && strings.Contains(tc.wantLinks[i], "url=") && got != tc.wantLinks[i] {
					t.Errorf("link %d:\n got %s\nwant %s", i, got, tc.wantLinks[i])
				}
			}
			if len(result.Skipped) != len(tc.wantSkipped) {
				t.Errorf("%d skipped, want %d: %v", len(result.Skipped), len(tc.wantSkipped), result.Skipped)
			}
			for i, skipped := range result.Skipped {
				if i >= len(tc.wantSkipped) {
					break
				}
				want := tc.wantSkipped[i]
				if skipped.Position.String() != want.position || !strings.Contains(skipped.Reason, want.reason) {
					t.Errorf("skipped %d: got %q, want %s: ...%s...", i, skipped.Error(), want.position, want.reason)
				}
			}
			for _, want := range tc.wantNotes {
				if !strings.Contains(strings.Join(result.Notes, "\n"), want) {
					t.Errorf("notes %q lack %q", result.Notes, want)
				}
			}
		})
	}
}

func TestParseInline(t *testing.T) {
	tests := []struct {
		name        string
		input       string
		format      Format
		wantLinks   int
		wantSkipped []string // "position: reason" substrings, in order
		wantNotes   []string
		wantErr     string // a fatal error, substring
	}{
		{name: "header only", input: "url,code,expires,max_uses\n"},
		{name: "column names are case- and separator-blind", input: "URL, Max Uses\nhttps://example.com/,2\n", wantLinks: 1},
		{name: "CRLF and BOM", input: "\ufeffurl,code\r\nhttps://example.com/,a\r\n", wantLinks: 1},
		{name: "empty cells are unset", input: "url,code,expires,max_uses\nhttps://example.com/, , ,\n", wantLinks: 1},
		{name: "negative max_uses", input: "url,max_uses\nhttps://example.com/,-3\n", wantSkipped: []string{`line 2: invalid max_uses "-3"`}},
		{name: "fractional max_uses", input: "url,max_uses\nhttps://example.com/,1.5\n", wantSkipped: []string{`line 2: invalid max_uses "1.5"`}},
		{name: "date without time", input: "url,expires\nhttps://example.com/,2027-01-01\n", wantSkipped: []string{`line 2: invalid expires "2027-01-01": want an RFC 3339 time such as 2026-12-31T23:59:59Z`}},
		{name: "expiry now is past", input: "url,expires\nhttps://example.com/,2026-06-01T00:00:00Z\n", wantSkipped: []string{"line 2: already expired"}},
		{name: "65-character code", input: "url,code\nhttps://example.com/," + strings.Repeat("a", 65) + "\n", wantSkipped: []string{"line 2: invalid code"}},
		{name: "too many cells", input: "url,code\nhttps://example.com/,a,b\n", wantSkipped: []string{"line 2: the row has 3 cell(s) but the header has 2"}},
		{name: "multi-line cell keeps line numbers", input: "url,code\n\"https://example.com/\nmore\",a\nftp://x,b\n", wantSkipped: []string{"line 2: invalid url", "line 4: invalid url"}},
		{name: "syntax error stops", input: "url,code\nhttps://example.com/,a\nhttps://example.com/\"x,b\nhttps://example.com/,c\n", wantLinks: 1, wantSkipped: []string{`line 3: CSV syntax error: bare " in non-quoted-field; this row and the rest of the file were not read`}},
		{name: "a skipped row does not claim its code", input: "url,code\nftp://x,a\nhttps://example.com/,a\n", wantLinks: 1, wantSkipped: []string{"line 2: invalid url"}},
		{name: "codes are case-sensitive", input: "url,code\nhttps://example.com/1,Ab\nhttps://example.com/2,aB\n", wantLinks: 2},
		{name: "unknown column", input: "url,expiry\nhttps://example.com/,2027-01-01T00:00:00Z\n", wantErr: `unknown column(s) ["expiry"] in the header: the linkforge CSV columns are url, code, expires, max_uses`},
		{name: "missing url column", input: "code,expires\na,\n", format: FormatCSV, wantErr: `has no url column`},
		{name: "twice the same column", input: "url,code,Code\n", wantErr: `column "Code" appears twice`},
		{name: "two spellings of visits", input: "shortCode,longUrl,visits,visitsCount\n", wantErr: `columns "visits" and "visitsCount" mean the same thing`},
		{name: "empty input", input: "", format: FormatCSV, wantErr: "the input is empty"},
		{name: "unknown format", input: "url\n", format: "bitlyx", wantErr: `unknown format "bitlyx": use one of csv, yourls-sql,`},
		{name: "family that does not match", input: "url\n", format: "shlink", wantErr: `--format shlink, but the content is csv`},
		{name: "YOURLS extra column is a note", input: "keyword,url,title,timestamp,ip,clicks,plugin\nk,https://example.com/,,,,,x\n", wantLinks: 1, wantNotes: []string{`ignored column(s) ["plugin"]`}},
		{name: "YOURLS without keyword column", input: "url,title\nhttps://example.com/,x\n", format: FormatYOURLSTable, wantErr: "has no keyword column"},
		{name: "Shlink API page 1 of 3", input: `{"shortUrls":{"data":[],"pagination":{"currentPage":1,"pagesCount":3}}}`, wantNotes: []string{"page 1 of 3"}},
		{name: "Shlink bare array", input: `[{"shortCode":"a","longUrl":"https://example.com/"}]`, wantLinks: 1},
		{name: "Shlink maxVisits as a string", input: `[{"shortCode":"a","longUrl":"https://example.com/","meta":{"maxVisits":"7"}}]`, wantLinks: 1},
		{name: "Shlink object without shortUrls", input: `{"data":[]}`, format: FormatShlinkAPI, wantErr: "no shortUrls.data"},
		{name: "Shlink forwardQuery false", input: `[{"shortCode":"a","longUrl":"https://example.com/","forwardQuery":false}]`, wantLinks: 1},
		{name: "YOURLS JSON object", input: `{"keyword":"a","url":"https://example.com/"}`, format: FormatYOURLSTable, wantErr: "is not a JSON array"},
		{name: "broken JSON", input: `[{"keyword":`, wantErr: "not valid JSON"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			result, err := Parse([]byte(tc.input), Options{Format: tc.format, Now: testNow})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one containing %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Parse: %v", err)
			}
			if len(result.Links) != tc.wantLinks {
				t.Errorf("%d links, want %d (skipped: %v)", len(result.Links), tc.wantLinks, result.Skipped)
			}
			if len(result.Skipped) != len(tc.wantSkipped) {
				t.Fatalf("skipped %v, want %q", result.Skipped, tc.wantSkipped)
			}
			for i, want := range tc.wantSkipped {
				if got := result.Skipped[i].Error(); !strings.Contains(got, want) {
					t.Errorf("skipped %d: %q, want it to contain %q", i, got, want)
				}
			}
			notes := strings.Join(result.Notes, "\n")
			for _, want := range tc.wantNotes {
				if !strings.Contains(notes, want) {
					t.Errorf("notes %q lack %q", result.Notes, want)
				}
			}
			if len(tc.wantNotes) == 0 && len(result.Notes) > 0 {
				t.Errorf("unexpected notes %q", result.Notes)
			}
		})
	}
}

func TestDetect(t *testing.T) {
	tests := []struct {
		input   string
		want    Format
		wantErr []string
	}{
		{input: "url,code\n", want: FormatCSV},
		{input: "max_uses,URL\n", want: FormatCSV},
		{input: "keyword,url,title,timestamp,ip,clicks\n", want: FormatYOURLSTable},
		{input: "Short Code,Long URL\n", want: FormatShlinkCSV},
		{input: "createdAt,domain,shortCode,shortUrl,longUrl,title,tags,visits\n", want: FormatShlinkExport},
		{input: ` {"shortUrls":{"data":[]}}`, want: FormatShlinkAPI},
		{input: `[{"shortCode":"a"}]`, want: FormatShlinkAPI},
		{input: `[{"keyword":"a"}]`, want: FormatYOURLSTable},
		{input: "link,target\n", wantErr: []string{"tried XML, JSON, SQL and CSV", `header ["link" "target"]`, "pass --format"}},
		{input: `[]`, wantErr: []string{"tried JSON", "pass --format (csv, yourls-sql"}},
		{input: `{"links":{}}`, wantErr: []string{"tried JSON"}},
		{input: "", wantErr: []string{"no header row"}},
	}
	for _, tc := range tests {
		got, err := Detect([]byte(tc.input))
		if len(tc.wantErr) > 0 {
			if err == nil {
				t.Errorf("Detect(%q) = %q, want an error", tc.input, got)
				continue
			}
			for _, want := range tc.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("Detect(%q) error %q lacks %q", tc.input, err, want)
				}
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("Detect(%q) = %q, %v; want %q", tc.input, got, err, tc.want)
		}
	}
}
