package importer

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// fullSummary is summary with the domain, labels and annotations.
func fullSummary(l Link) string {
	s := summary(l)
	if l.Domain != "" {
		s += " domain=" + l.Domain
	}
	if l.Namespace != "" {
		s += " namespace=" + l.Namespace
	}
	var meta []string
	for k, v := range l.Labels {
		meta = append(meta, k+"="+v)
	}
	for k, v := range l.Annotations {
		meta = append(meta, fmt.Sprintf("%s=%q", k, v))
	}
	sort.Strings(meta)
	if len(meta) > 0 {
		s += " " + strings.Join(meta, " ")
	}
	return s
}

// TestParseRealFormats reads every fixture built from an upstream writer
// (testdata/README.md) with the format guessed from the content, and holds
// each row to what it must become: a link with every field kept, or a
// skip with its position and reason.
func TestParseRealFormats(t *testing.T) {
	tests := []struct {
		file    string
		format  Format
		links   []string // fullSummary
		skipped []string // RowError.Error()
		notes   []string
	}{
		{
			file:   "bitly.csv",
			format: FormatBitlyCSV,
			links: []string{
				`line 2 code="aaa" url=https://shlink.io domain=bit.ly linkforge.io/imported-visits="10" linkforge.io/title="Shlink"`,
				`line 3 code="bbb" url=https://github.com domain=bit.ly linkforge.io/imported-visits="3" linkforge.io/title="GitHub" tag.linkforge.io/bar=true tag.linkforge.io/foo=true`,
			},
			skipped: []string{
				`line 4: invalid Long URL "not a url": not an absolute URL: the URL must have the form http(s)://host/path, e.g. https://example.com/page`,
			},
			notes: []string{
				`2 link(s) of short domain bit.ly go to the default namespace (map it with --domain bit.ly=NAMESPACE)`,
			},
		},
		{
			file:   "bitly.json",
			format: FormatBitlyAPI,
			links: []string{
				`links[0] code="aaa" url=https://shlink.io domain=bit.ly`,
				`links[1] code="bbb" url=https://github.com domain=bit.ly linkforge.io/title="GitHub" tag.linkforge.io/bar=true tag.linkforge.io/foo=true`,
				`links[2] code="ddd" url=https://github.com/shlinkio domain=customdom.com linkforge.io/title="Cool title" tag.linkforge.io/bar=true`,
			},
			skipped: []string{
				`links[3]: long_url is empty: every link needs a target URL`,
			},
			notes: []string{
				`2 link(s) of short domain bit.ly go to the default namespace (map it with --domain bit.ly=NAMESPACE)`,
				`1 link(s) of short domain customdom.com go to the default namespace (map it with --domain customdom.com=NAMESPACE)`,
			},
		},
		{
			file:   "dub-all.csv",
			format: FormatDubCSV,
			links: []string{
				`line 2 code="github" url=https://github.com/dubinc/dub domain=dub.sh linkforge.io/imported-visits="120" tag.linkforge.io/Q3-Campaign=true tag.linkforge.io/launch=true`,
				`line 3 code="sale" url=https://acme.com/sale domain=go.acme.com linkforge.io/imported-visits="7" tag.linkforge.io/minus=true`,
			},
			skipped: []string{
				`line 4: invalid Destination URL "ftp://acme.com/x": scheme: scheme "ftp" is not allowed; use http or https`,
			},
			notes: []string{
				`tag "Q3 Campaign" is label tag.linkforge.io/Q3-Campaign: a label name is at most 63 of A-Z a-z 0-9 - _ . and starts and ends with a letter or digit`,
				`tag "-minus" is label tag.linkforge.io/minus: a label name is at most 63 of A-Z a-z 0-9 - _ . and starts and ends with a letter or digit`,
				`1 link(s) of short domain dub.sh go to the default namespace (map it with --domain dub.sh=NAMESPACE)`,
				`1 link(s) of short domain go.acme.com go to the default namespace (map it with --domain go.acme.com=NAMESPACE)`,
			},
		},
		{
			file:   "dub-default.csv",
			format: FormatDubCSV,
			links: []string{
				`line 2 code="github" url=https://github.com/dubinc/dub domain=dub.sh linkforge.io/imported-visits="120"`,
				`line 3 code="launch" url=https://acme.com/launch?utm_source=x,y domain=go.acme.com linkforge.io/imported-visits="7"`,
			},
			skipped: []string{
				`line 4: Short link "https://go.acme.com" has no path, so no code: a dub link keeps its code, so that its short URL keeps working`,
				`line 5: invalid Short link (its path) "docs/api": a code is 1-64 characters of A-Z a-z 0-9 _ -`,
			},
			notes: []string{
				`1 link(s) of short domain dub.sh go to the default namespace (map it with --domain dub.sh=NAMESPACE)`,
				`1 link(s) of short domain go.acme.com go to the default namespace (map it with --domain go.acme.com=NAMESPACE)`,
			},
		},
		{
			file:   "dub-old.csv",
			format: FormatDubCSV,
			links: []string{
				`line 2 code="old" url=https://example.com/old domain=dub.sh linkforge.io/imported-visits="2"`,
			},
			skipped: []string{},
			notes: []string{
				`1 link(s) of short domain dub.sh go to the default namespace (map it with --domain dub.sh=NAMESPACE)`,
			},
		},
		{
			file:   "kutt.json",
			format: FormatKuttAPI,
			links: []string{
				`data[0] code="short-code" url=https://longurl.com expires=2027-04-16T00:00:00Z domain=s.test linkforge.io/imported-visits="3"`,
				`data[1] code="short-code-2" url=https://longurl-2.com domain=kutt.it linkforge.io/imported-visits="25" linkforge.io/title="foo link"`,
				`data[2] code="sqlite" url=https://example.com/sqlite expires=2027-01-01T00:00:00Z domain=kutt.it linkforge.io/imported-visits="0"`,
			},
			skipped: []string{
				`data[3]: the link has a password on Kutt and a ShortLink cannot ask for one: importing it would open it to everyone`,
				`data[4]: already expired: expire_in 2026-02-01T00:00:00.000Z is in the past; only live links are imported`,
			},
			notes: []string{
				`1 link(s) of short domain s.test go to the default namespace (map it with --domain s.test=NAMESPACE)`,
				`2 link(s) of short domain kutt.it go to the default namespace (map it with --domain kutt.it=NAMESPACE)`,
			},
		},
		{
			file:   "shlink-export-old.csv",
			format: FormatShlinkExport,
			links: []string{
				`line 2 code="abc123" url=https://example.com/a domain=s.test linkforge.io/imported-visits="12" linkforge.io/title="Title A" tag.linkforge.io/bar=true tag.linkforge.io/foo=true`,
				`line 3 code="old-api" url=https://example.com/old-api domain=s.test linkforge.io/imported-visits="5"`,
			},
			skipped: []string{
				`line 4: shortUrl "https://s.test/" has no path, so no code: a Shlink link keeps its code, so that its short URL keeps working`,
			},
			notes: []string{
				`2 link(s) of short domain s.test go to the default namespace (map it with --domain s.test=NAMESPACE)`,
			},
		},
		{
			file:   "shlink-importer-comma.csv",
			format: FormatShlinkCSV,
			links: []string{
				`line 2 code="123" url=https://shlink.io tag.linkforge.io/bar=true tag.linkforge.io/baz=true tag.linkforge.io/foo=true`,
				`line 3 code="456" url=https://facebook.com domain=example.com linkforge.io/title="my title"`,
				`line 4 code="" url=https://example.com/no-code`,
			},
			skipped: []string{},
			notes: []string{
				`1 link(s) of short domain example.com go to the default namespace (map it with --domain example.com=NAMESPACE)`,
				`1 link(s) have no code: linkforge computes theirs from the URL`,
			},
		},
		{
			file:   "shlink-importer-semicolon.csv",
			format: FormatShlinkCSV,
			links: []string{
				`line 2 code="abc" url=https://alejandrocelaya.blog`,
				`line 3 code="def" url=https://facebook.com domain=example.com tag.linkforge.io/baz=true tag.linkforge.io/foo=true`,
				`line 4 code="ghi" url=https://shlink.io/documentation domain=example.com linkforge.io/title="the title"`,
			},
			skipped: []string{
				`line 5: duplicate short code "def": line 3 already has it; a code is unique in a namespace (links of different short domains go to different namespaces with --domain HOST=NAMESPACE)`,
			},
			notes: []string{
				`2 link(s) of short domain example.com go to the default namespace (map it with --domain example.com=NAMESPACE)`,
			},
		},
		{
			file:   "shlink-importer-shorturl.csv",
			format: FormatShlinkCSV,
			links: []string{
				`line 2 code="inferred-short-code" url=https://facebook.com domain=example.es tag.linkforge.io/foo-baz=true`,
			},
			skipped: []string{},
			notes: []string{
				`1 link(s) of short domain example.es go to the default namespace (map it with --domain example.es=NAMESPACE)`,
			},
		},
		{
			file:   "sink.json",
			format: FormatSinkJSON,
			links: []string{
				`links[0] code="sink" url=https://sink.cool linkforge.io/title="Sink - A Simple Link Shortener" tag.linkforge.io/Open-Source=true tag.linkforge.io/docs=true`,
				`links[1] code="github" url=https://github.com/miantiao-me/Sink expires=2030-01-01T00:00:00Z forwardQuery`,
			},
			skipped: []string{
				`links[2]: the link has a password on Sink and a ShortLink cannot ask for one: importing it would open it to everyone`,
				`links[3]: already expired: expiration 2025-01-01T00:00:00Z is in the past; only live links are imported`,
			},
			notes: []string{
				`tag "Open Source" is label tag.linkforge.io/Open-Source: a label name is at most 63 of A-Z a-z 0-9 - _ . and starts and ends with a letter or digit`,
				`1 link(s) have geo or device targets (geo, apple, google) that a ShortLink does not have: they redirect everyone to url`,
			},
		},
		{
			file:   "yourls-api-shlink-list.json",
			format: FormatYOURLSAPI,
			links: []string{
				`result[0] code="ozh" url=https://ozh.org/ linkforge.io/imported-visits="42" linkforge.io/title="ozh.org"`,
				`result[1] code="yourls" url=https://yourls.org/ linkforge.io/imported-visits="0" linkforge.io/title="YOURLS: Your Own URL Shortener"`,
			},
			skipped: []string{
				`result[2]: invalid url "ftp://example.com/file": scheme: scheme "ftp" is not allowed; use http or https`,
			},
			notes: []string{},
		},
		{
			file:   "yourls-api-stats.json",
			format: FormatYOURLSAPI,
			links: []string{
				`links.link_1 code="ozh" url=https://ozh.org/ domain=sho.rt linkforge.io/imported-visits="42" linkforge.io/title="ozh.org"`,
				`links.link_2 code="gh" url=https://github.com/YOURLS/YOURLS domain=sho.rt linkforge.io/imported-visits="7" linkforge.io/title="GitHub - YOURLS/YOURLS: \"Your Own URL Shortener\""`,
				`links.link_3 code="yourlsblog" url=https://blog.yourls.org/ domain=sho.rt linkforge.io/imported-visits="3" linkforge.io/title="YOURLS' Blog"`,
			},
			skipped: []string{
				`links.link_4: invalid shorturl (its path) "café": a code is 1-64 characters of A-Z a-z 0-9 _ -`,
				`links.link_5: shorturl "https://sho.rt/" has no path, so no code: a YOURLS link keeps its code, so that its short URL keeps working`,
			},
			notes: []string{
				`3 link(s) of short domain sho.rt go to the default namespace (map it with --domain sho.rt=NAMESPACE)`,
			},
		},
		{
			file:   "yourls-mysqldump.sql",
			format: FormatYOURLSSQL,
			links: []string{
				`line 71, row 1 code="gh" url=https://github.com/YOURLS/YOURLS linkforge.io/imported-visits="7" linkforge.io/title="GitHub - YOURLS/YOURLS: \"Your Own URL Shortener\""`,
				`line 71, row 2 code="Blog" url=https://example.com/blog linkforge.io/imported-visits="0" linkforge.io/title="Line one\nline two"`,
				`line 71, row 3 code="unicode" url=https://example.com/caf%C3%A9?q=café linkforge.io/imported-visits="2" linkforge.io/title="Café"`,
			},
			skipped: []string{
				`line 71, row 4: url is empty: every link needs a target URL`,
				`line 71, row 5: duplicate keyword "gh": line 71, row 1 already has it; a code is unique in a namespace`,
			},
			notes: []string{
				`read table yourls_url; the rows of 1 other table(s) of the dump were ignored`,
			},
		},
		{
			file:   "yourls-navicat.sql",
			format: FormatYOURLSSQL,
			links: []string{
				`line 40, row 1 code="promo" url=https://example.com/promo?utm_source=news&utm_medium=mail linkforge.io/imported-visits="5" linkforge.io/title="Spring promo"`,
				`line 41, row 1 code="Docs_v2" url=https://example.com/docs/v2 linkforge.io/imported-visits="0" linkforge.io/title="It's the docs"`,
				`line 42, row 1 code="bin" url=https://example.com/bin linkforge.io/imported-visits="1" linkforge.io/title="Binary"`,
				`line 44, row 1 code="now" url=https://example.com/now linkforge.io/imported-visits="0"`,
			},
			skipped: []string{
				`line 43, row 1: the row has 5 value(s) but table lnk_url has 6 column(s) ["keyword" "url" "title" "timestamp" "ip" "clicks"]`,
			},
			notes: []string{
				`read table lnk_url; the rows of 1 other table(s) of the dump were ignored`,
			},
		},
		{
			file:   "yourls-phpmyadmin.sql",
			format: FormatYOURLSSQL,
			links: []string{
				`line 90, row 1 code="ozh" url=https://ozh.org/ linkforge.io/imported-visits="42" linkforge.io/title="ozh.org"`,
				`line 91, row 2 code="yourls" url=https://yourls.org/ linkforge.io/imported-visits="0" linkforge.io/title="YOURLS: Your Own URL Shortener"`,
				`line 92, row 3 code="yourlsblog" url=https://blog.yourls.org/ linkforge.io/imported-visits="3" linkforge.io/title="YOURLS' Blog"`,
				`line 93, row 4 code="q" url=https://example.com/search?q=a,b&c='d' linkforge.io/imported-visits="1" linkforge.io/title="Search \"a,b\"; then (c)"`,
				`line 94, row 5 code="hex" url=https://example.com/hex linkforge.io/imported-visits="0"`,
			},
			skipped: []string{
				`line 95, row 6: invalid keyword "a/b": a code is 1-64 characters of A-Z a-z 0-9 _ -`,
				`line 96, row 7: invalid url "javascript:alert(1)": not an absolute URL: the URL must have the form http(s)://host/path, e.g. https://example.com/page`,
			},
			notes: []string{
				`read table yourls_url; the rows of 2 other table(s) of the dump were ignored`,
			},
		},
		{
			file:   "yourls-plugin.csv",
			format: FormatYOURLSCSV,
			links: []string{
				`line 2 code="ozh" url=https://ozh.org/ linkforge.io/imported-visits="42"`,
				`line 3 code="gh" url=https://github.com/YOURLS/YOURLS linkforge.io/imported-visits="7"`,
				`line 4 code="q" url=https://example.com/search?q=a,b&say="hi" linkforge.io/imported-visits="0"`,
			},
			skipped: []string{
				`line 5: invalid source (its path) "a b": a code is 1-64 characters of A-Z a-z 0-9 _ -`,
				`line 6: source "//" has no path, so no code: a YOURLS link keeps its code, so that its short URL keeps working`,
				`line 7: duplicate source (its path) "ozh": line 2 already has it; a code is unique in a namespace`,
			},
			notes: []string{},
		},
		{
			file:   "yourls-plugin.xml",
			format: FormatYOURLSXML,
			links: []string{
				`line 6 code="ozh" url=https://ozh.org/ linkforge.io/imported-visits="42" linkforge.io/title="ozh.org"`,
				`line 14 code="yourlsblog" url=https://blog.yourls.org/?a=1&b=2 linkforge.io/imported-visits="3" linkforge.io/title="YOURLS' Blog & news"`,
				`line 22 code="notitle" url=https://example.com/notitle linkforge.io/imported-visits="0"`,
			},
			skipped: []string{
				`line 30: invalid action "mailto:someone@example.com": not an absolute URL: the URL must have the form http(s)://host/path, e.g. https://example.com/page`,
				`line 38: invalid statistic count "lots": a whole number of at least 0`,
			},
			notes: []string{},
		},
	}
	for _, tc := range tests {
		t.Run(tc.file, func(t *testing.T) {
			data, err := os.ReadFile(filepath.Join("testdata", tc.file))
			if err != nil {
				t.Fatal(err)
			}
			// Guessed, named by family, and named exactly: the same result.
			for _, format := range []Format{"", Format(tc.format.Family()), tc.format} {
				result, err := Parse(data, Options{Format: format, Now: testNow})
				if err != nil {
					t.Fatalf("--format %q: %v", format, err)
				}
				if result.Format != tc.format {
					t.Errorf("--format %q: format %q, want %q", format, result.Format, tc.format)
				}
				var links, skipped []string
				for _, l := range result.Links {
					links = append(links, fullSummary(l))
				}
				for _, s := range result.Skipped {
					skipped = append(skipped, s.Error())
				}
				compare(t, "links", links, tc.links)
				compare(t, "skipped", skipped, tc.skipped)
				compare(t, "notes", result.Notes, tc.notes)
			}
		})
	}
}

func compare(t *testing.T, what string, got, want []string) {
	t.Helper()
	for i := 0; i < len(got) || i < len(want); i++ {
		var g, w string
		if i < len(got) {
			g = got[i]
		}
		if i < len(want) {
			w = want[i]
		}
		if g != w {
			t.Errorf("%s[%d]:\n got %s\nwant %s", what, i, g, w)
		}
	}
}
