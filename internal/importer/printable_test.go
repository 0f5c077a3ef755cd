package importer

import (
	"strings"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestPrintable(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"plain https://example.com/?a=1", "plain https://example.com/?a=1"},
		{`already "quoted\x1b" by %q`, `already "quoted\x1b" by %q`}, // backslashes are kept: %q's output is printable
		{"\x1b]0;owned\a\x1b[2J", `\x1b]0;owned\a\x1b[2J`},
		{"over\rwrite\bx", `over\rwrite\bx`},
		{"tab\tnew\nline", `tab\tnew\nline`},
		{"\u009b31m C1", `\u009b31m C1`},
		{"evil\u202egnp.exe", `evil\u202egnp.exe`},
		{"zero\u200bwidth", `zero\u200bwidth`},
		{"bad \xff\xfe utf-8", `bad \xff\xfe utf-8`},
		{"日本 ünïcode ✓", "日本 ünïcode ✓"},
		{"\x7f", `\x7f`},
	} {
		got := Printable(tc.in)
		if got != tc.want {
			t.Errorf("Printable(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if again := Printable(got); again != got {
			t.Errorf("Printable is not idempotent on %q: %q", got, again)
		}
	}
}

// hostile is what a hostile export puts where the importer echoes input:
// an OSC that retitles the terminal, a CSI that clears it, a C1 CSI, a
// carriage return that hides what came before, a bidirectional override.
const hostile = "\x1b]0;pwned\a\x1b[2J\u009b1m\rX\u202e"

// printableOnly fails when s holds anything a terminal would act on.
func printableOnly(t *testing.T, what, s string) {
	t.Helper()
	for i, r := range s {
		if r == utf8.RuneError || !unicode.IsPrint(r) && r != ' ' {
			t.Errorf("%s holds %U at %d: %q", what, r, i, s)
			return
		}
	}
}

// TestMessagesArePrintable: whatever the input holds, no message of the
// importer (a skipped row, a note, a fatal error) carries a control
// character or an invisible one. Each input puts hostile text where a
// message quotes it without %q: a column name, a short domain, an SQL
// table name, a JSON member name, a Bitly next page, a Sink cursor.
func TestMessagesArePrintable(t *testing.T) {
	for _, tc := range []struct {
		name   string
		input  string
		format Format
		want   string // in a message, when set
	}{
		{"CSV column name", "url,max_uses" + hostile + "\nhttps://example.com/,x\n", FormatShlinkCSV, ""},
		{"CSV column names of a bad header", "link" + hostile + ",target\n", "", ""},
		{"short domain", "Long URL,Short code,Domain\nhttps://example.com/,a,s" + hostile + ".test\n", "", ""},
		{"short domain with %", "Long URL,Short code,Domain\nhttps://example.com/,a,100%s.test\n", "", "1 link(s) of short domain 100%s.test go to the default namespace"},
		{"SQL table", "INSERT INTO `x" + hostile + "url` VALUES ('a','https://example.com/'),('b','https://example.com/b','','','',0);\nINSERT INTO other VALUES (1);", FormatYOURLSSQL, ""},
		{"SQL hex literal", "INSERT INTO yourls_url VALUES (X'4" + hostile + "','https://example.com/','','','',0);", FormatYOURLSSQL, ""},
		{"YOURLS API member", `{"links":{"link_1` + jsonEscape(hostile) + `":{"url":"ftp://x"}},"stats":{"total_links":"9"}}`, "", ""},
		{"Bitly next page", `{"links":[],"pagination":{"next":"` + jsonEscape(hostile) + `"}}`, FormatBitlyAPI, ""},
		{"Sink cursor", `{"links":[],"cursor":"` + jsonEscape(hostile) + `","list_complete":false}`, FormatSinkJSON, ""},
		{"XML root", "<x" + hostile + "/>", FormatYOURLSXML, ""},
		{"Shlink boolean", `[{"shortCode":"a","longUrl":"https://example.com/","forwardQuery":"` + hostile[1:3] + "\u202e" + `"}]`, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			result, err := Parse([]byte(tc.input), Options{Format: tc.format, Now: testNow})
			if err != nil {
				printableOnly(t, "error", err.Error())
				return
			}
			if len(result.Skipped)+len(result.Notes) == 0 {
				t.Fatalf("no message: the case tests nothing")
			}
			for _, s := range result.Skipped {
				printableOnly(t, "skipped row", s.Error())
			}
			for _, note := range result.Notes {
				printableOnly(t, "note", note)
			}
			if all := strings.Join(result.Notes, "\n"); !strings.Contains(all, tc.want) {
				t.Errorf("notes %q lack %q", all, tc.want)
			}
		})
	}
}

// jsonEscape writes s as the inside of a JSON string.
func jsonEscape(s string) string {
	var b strings.Builder
	for _, r := range s {
		if r < 0x20 {
			b.WriteString(`\u00`)
			b.WriteByte("0123456789abcdef"[r>>4])
			b.WriteByte("0123456789abcdef"[r&0xf])
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
