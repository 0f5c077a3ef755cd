package importer

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/util/validation"
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
	meta := make([]string, 0, len(l.Labels)+len(l.Annotations))
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

func TestDomainsMapToNamespaces(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("testdata", "shlink.csv"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		domains map[string]string
		links   []string
		skipped []string
	}{
		{
			// Two links with code abc123 on two domains: one namespace each.
			name:    "every domain mapped",
			domains: map[string]string{"s.test": "team-a", "GO.example.com": "team-b"},
			links: []string{
				`line 2 code="abc123" url=https://example.com/a domain=s.test namespace=team-a linkforge.io/imported-visits="12" linkforge.io/title="Title A" tag.linkforge.io/bar=true tag.linkforge.io/foo=true`,
				`line 3 code="Docs_v2" url=https://example.com/docs/v2 domain=s.test namespace=team-a linkforge.io/imported-visits="0"`,
				`line 4 code="abc123" url=https://example.com/other-domain domain=go.example.com namespace=team-b linkforge.io/imported-visits="3" linkforge.io/title="Say \"hi\"" tag.linkforge.io/Summer-Sale=true tag.linkforge.io/team-a=true`,
			},
			skipped: []string{`line 5: invalid longUrl "example.com/no-scheme": not an absolute URL: the URL must have the form http(s)://host/path, e.g. https://example.com/page`},
		},
		{
			name:    "a domain left out is reported, not guessed",
			domains: map[string]string{"s.test": "team-a"},
			links: []string{
				`line 2 code="abc123" url=https://example.com/a domain=s.test namespace=team-a linkforge.io/imported-visits="12" linkforge.io/title="Title A" tag.linkforge.io/bar=true tag.linkforge.io/foo=true`,
				`line 3 code="Docs_v2" url=https://example.com/docs/v2 domain=s.test namespace=team-a linkforge.io/imported-visits="0"`,
			},
			skipped: []string{
				`line 4: short domain go.example.com is not mapped to a namespace: add --domain go.example.com=NAMESPACE`,
				`line 5: invalid longUrl "example.com/no-scheme": not an absolute URL: the URL must have the form http(s)://host/path, e.g. https://example.com/page`,
			},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			result, err := Parse(data, Options{Now: testNow, Domains: tc.domains})
			if err != nil {
				t.Fatal(err)
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
		})
	}

	// A link without a domain (linkforge's CSV) stays in the default
	// namespace whatever --domain says.
	result, err := Parse([]byte("url,code\nhttps://example.com/,a\n"), Options{Now: testNow, Domains: map[string]string{"s.test": "team-a"}})
	if err != nil || len(result.Links) != 1 || result.Links[0].Namespace != "" {
		t.Errorf("linkforge CSV with --domain: %+v, %v", result, err)
	}
}

func TestLabelName(t *testing.T) {
	tests := []struct{ tag, want string }{
		{"foo", "foo"},
		{"Q3 Campaign", "Q3-Campaign"},
		{"Summer Sale!", "Summer-Sale"},
		{"team/a", "team-a"},
		{"  -x- ", "x"},
		{"a..b_c", "a..b_c"},
		{"über", "ber"},
		{"日本", ""},
		{"!!!", ""},
		{strings.Repeat("a", 62) + " b", strings.Repeat("a", 62)},
		{strings.Repeat("x", 80), strings.Repeat("x", 63)},
	}
	for _, tc := range tests {
		got := labelName(tc.tag)
		if got != tc.want {
			t.Errorf("labelName(%q) = %q, want %q", tc.tag, got, tc.want)
		}
		if got != "" {
			if errs := validation.IsQualifiedName(TagLabelPrefix + got); len(errs) > 0 {
				t.Errorf("labelName(%q) = %q: not a valid label key: %v", tc.tag, got, errs)
			}
		}
	}
}

func TestTagsReportWhatChanged(t *testing.T) {
	input := `{"version":"1.0","links":[{"slug":"a","url":"https://example.com/a","tags":["ok","Two words","日本"]},{"slug":"b","url":"https://example.com/b","tags":["Two words"]}],"list_complete":true}`
	result, err := Parse([]byte(input), Options{Now: testNow})
	if err != nil {
		t.Fatal(err)
	}
	compare(t, "notes", result.Notes, []string{
		`tag "Two words" is label tag.linkforge.io/Two-words: a label name is at most 63 of A-Z a-z 0-9 - _ . and starts and ends with a letter or digit`,
		`tag "日本" has no letter or digit a label name can keep: it is not kept`,
	})
	if got := fullSummary(result.Links[0]); got != `links[0] code="a" url=https://example.com/a tag.linkforge.io/Two-words=true tag.linkforge.io/ok=true` {
		t.Errorf("link 0: %s", got)
	}
}

// TestPartialAnswers: an API answer that holds one page says so, so that
// nobody takes it for the whole list.
func TestPartialAnswers(t *testing.T) {
	tests := []struct{ name, input, note string }{
		{"YOURLS stats under its limit", `{"links":{"link_1":{"shorturl":"https:\/\/sho.rt\/a","url":"https:\/\/example.com\/"}},"stats":{"total_links":"40","total_clicks":"0"},"statusCode":"200","message":"success"}`, "the answer holds 1 of the 40 links: the stats action returns at most its limit; ask again with limit=40"},
		{"Bitly next page", `{"links":[],"pagination":{"prev":"","next":"https://api-ssl.bitly.com/v4/groups/B1/bitlinks?page=2","size":50,"page":1,"total":120}}`, "the answer has more pages (pagination.next https://api-ssl.bitly.com/v4/groups/B1/bitlinks?page=2)"},
		{"Kutt page", `{"total":51,"limit":50,"skip":0,"data":[{"address":"a","target":"https://example.com/"}]}`, "the answer holds links 1-1 of 51"},
		{"Sink cursor", `{"version":"1.0","links":[],"cursor":"abc","list_complete":false}`, "ask again with cursor=abc"},
		{"Shlink page", `{"shortUrls":{"data":[],"pagination":{"currentPage":1,"pagesCount":3}}}`, "page 1 of 3"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			result, err := Parse([]byte(tc.input), Options{Now: testNow})
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(strings.Join(result.Notes, "\n"), tc.note) {
				t.Errorf("notes %q lack %q", result.Notes, tc.note)
			}
		})
	}
}

// TestDetectEveryFixture: every fixture is told apart from every other
// format by its content alone.
func TestDetectEveryFixture(t *testing.T) {
	want := map[string]Format{
		"links.csv": FormatCSV, "reordered.csv": FormatCSV,
		"yourls-phpmyadmin.sql": FormatYOURLSSQL, "yourls-mysqldump.sql": FormatYOURLSSQL, "yourls-navicat.sql": FormatYOURLSSQL,
		"yourls.csv": FormatYOURLSTable, "yourls.json": FormatYOURLSTable,
		"yourls-plugin.csv": FormatYOURLSCSV, "yourls-plugin.xml": FormatYOURLSXML,
		"yourls-api-stats.json": FormatYOURLSAPI, "yourls-api-shlink-list.json": FormatYOURLSAPI,
		"shlink-importer-comma.csv": FormatShlinkCSV, "shlink-importer-semicolon.csv": FormatShlinkCSV, "shlink-importer-shorturl.csv": FormatShlinkCSV,
		"shlink.csv": FormatShlinkExport, "shlink-export-old.csv": FormatShlinkExport, "shlink.json": FormatShlinkAPI,
		"bitly.json": FormatBitlyAPI, "bitly.csv": FormatBitlyCSV,
		"dub-default.csv": FormatDubCSV, "dub-all.csv": FormatDubCSV, "dub-old.csv": FormatDubCSV,
		"kutt.json": FormatKuttAPI, "sink.json": FormatSinkJSON,
	}
	files, err := filepath.Glob(filepath.Join("testdata", "*"))
	if err != nil {
		t.Fatal(err)
	}
	seen := map[Format]bool{}
	for _, file := range files {
		name := filepath.Base(file)
		if name == "README.md" {
			continue
		}
		format, ok := want[name]
		if !ok {
			t.Errorf("%s: no expected format; add it to this test", name)
			continue
		}
		data, err := os.ReadFile(file)
		if err != nil {
			t.Fatal(err)
		}
		got, err := Detect(data)
		if err != nil || got != format {
			t.Errorf("Detect(%s) = %q, %v; want %q", name, got, err, format)
		}
		seen[format] = true
	}
	for _, f := range Formats {
		if !seen[f] {
			t.Errorf("no fixture of format %s", f)
		}
	}
}
