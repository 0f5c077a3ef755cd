package importer

import (
	"strings"
	"testing"
)

// TestSQLDump holds the dump reader to MySQL's lexical rules and to what it
// must report: every case is a small dump and what each row becomes.
func TestSQLDump(t *testing.T) {
	const create = "CREATE TABLE `yourls_url` (`keyword` varchar(100) NOT NULL DEFAULT '', `url` text NOT NULL, `title` text, `timestamp` timestamp NOT NULL DEFAULT CURRENT_TIMESTAMP, `ip` varchar(41) NOT NULL, `clicks` int(10) unsigned NOT NULL, PRIMARY KEY (`keyword`), KEY `url_idx` (`url`(30)));\n"
	tests := []struct {
		name    string
		dump    string
		table   string
		links   []string // fullSummary
		skipped []string
		notes   []string // substrings
		wantErr string
	}{
		{
			name:  "backslash escapes and doubled quotes",
			dump:  create + `INSERT INTO yourls_url VALUES ('a','https://example.com/?q=\'x\'&r=it''s','t\\1\t"\"',NOW(),'::1',0);`,
			links: []string{`line 2, row 1 code="a" url=https://example.com/?q='x'&r=it's linkforge.io/imported-visits="0" linkforge.io/title="t\\1\t\"\""`},
		},
		{
			name:  "comments hold no rows, even with ; and quotes inside",
			dump:  "-- a comment; with 'quote\n# another; 'one\n/* block; INSERT INTO yourls_url VALUES ('x','https://example.com/x','','','',0); */\n/*!40101 SET NAMES utf8mb4 */;\n" + create + "INSERT INTO yourls_url VALUES ('a','https://example.com/--not-a-comment','',NULL,'',1);",
			links: []string{`line 6, row 1 code="a" url=https://example.com/--not-a-comment linkforge.io/imported-visits="1"`},
		},
		{
			name:  "double-quoted strings, REPLACE, IGNORE, db-qualified name, ON DUPLICATE KEY UPDATE",
			dump:  create + "REPLACE INTO `yourls`.`yourls_url` VALUES (\"a\",\"https://example.com/a\",\"\",\"\",\"\",2);\nINSERT IGNORE INTO yourls.yourls_url (`keyword`,`url`) VALUES ('b','https://example.com/b') ON DUPLICATE KEY UPDATE url=VALUES(url);",
			links: []string{`line 2, row 1 code="a" url=https://example.com/a linkforge.io/imported-visits="2"`, `line 3, row 1 code="b" url=https://example.com/b`},
		},
		{
			name:  "hex literals: 0x (odd length padded), X'', _binary introducer",
			dump:  create + "INSERT INTO yourls_url VALUES (0x6162,X'68747470733a2f2f6578616d706c652e636f6d2f',_binary 0x54,'','',0),(0x161,'https://example.com/b',NULL,'','',-0);",
			links: []string{`line 2, row 1 code="ab" url=https://example.com/ linkforge.io/imported-visits="0" linkforge.io/title="T"`},
			// 0x161 is the bytes 01 61: a control character, not a code.
			skipped: []string{`line 2, row 2: invalid keyword "\x01a"`},
		},
		{
			name:    "a hex literal that is not UTF-8",
			dump:    create + "INSERT INTO yourls_url VALUES (0xff,'https://example.com/','','','',0);",
			skipped: []string{"line 2, row 1: keyword or url is not UTF-8 text"},
		},
		{
			name:    "a broken row ends its INSERT, the next INSERT is read",
			dump:    create + "INSERT INTO yourls_url VALUES ('a','https://example.com/a','','','',0),('b' 'x'),('c','https://example.com/c','','','',0);\nINSERT INTO yourls_url VALUES ('d','https://example.com/d','','','',0);",
			links:   []string{`line 2, row 1 code="a" url=https://example.com/a linkforge.io/imported-visits="0"`, `line 3, row 1 code="d" url=https://example.com/d linkforge.io/imported-visits="0"`},
			skipped: []string{`line 2: SQL syntax error in the INSERT of line 2: want , or ) after a value, not "x"; the rest of this INSERT was not read`},
		},
		{
			name:    "an unclosed string ends the dump; rows before it are kept",
			dump:    create + "INSERT INTO yourls_url VALUES ('a','https://example.com/a','','','',0);\nINSERT INTO yourls_url VALUES ('b','https://example.com/b,'','','',0);\n",
			links:   []string{`line 2, row 1 code="a" url=https://example.com/a linkforge.io/imported-visits="0"`},
			skipped: []string{`line 3: SQL syntax error: a string opened with ' is not closed; the rest of the dump was not read`},
		},
		{
			name:    "an unclosed comment",
			dump:    create + "INSERT INTO yourls_url VALUES ('a','https://example.com/a','','','',0);\n/* never closed",
			links:   []string{`line 2, row 1 code="a" url=https://example.com/a linkforge.io/imported-visits="0"`},
			skipped: []string{`line 3: SQL syntax error: a /* comment is not closed with */; the rest of the dump was not read`},
		},
		{
			name:  "no CREATE TABLE and no column list: YOURLS' column order, any prefix",
			dump:  "LOCK TABLES `short_url` WRITE;\nINSERT INTO `short_url` VALUES ('a','https://example.com/a','A','2024-01-01 00:00:00','::1',5);\nUNLOCK TABLES;",
			links: []string{`line 2, row 1 code="a" url=https://example.com/a linkforge.io/imported-visits="5" linkforge.io/title="A"`},
			notes: []string{"columns are taken in YOURLS' order"},
		},
		{
			name:    "two installs in one database",
			dump:    "INSERT INTO a_url VALUES ('a','https://example.com/a','','','',0);\nINSERT INTO b_url VALUES ('b','https://example.com/b','','','',0);",
			wantErr: `the dump holds 2 YOURLS URL tables ["a_url" "b_url"] (one per table prefix): pass --table`,
		},
		{
			name:  "two installs, one picked",
			dump:  "INSERT INTO a_url VALUES ('a','https://example.com/a','','','',0);\nINSERT INTO b_url VALUES ('b','https://example.com/b','','','',0);",
			table: "B_URL",
			links: []string{`line 2, row 1 code="b" url=https://example.com/b linkforge.io/imported-visits="0"`},
			notes: []string{"read table b_url; the rows of 1 other table(s)"},
		},
		{
			name:    "a table that is not there",
			dump:    "INSERT INTO a_url VALUES ('a','https://example.com/a','','','',0);",
			table:   "yourls_url",
			wantErr: `the dump has no table "yourls_url"; it has INSERTs into ["a_url"]`,
		},
		{
			name:    "no YOURLS table",
			dump:    "CREATE TABLE wp_posts (ID bigint, post_title text);\nINSERT INTO wp_posts VALUES (1,'Hello');",
			wantErr: `the dump has no INSERT into a YOURLS URL table (columns keyword and url, named <prefix>url such as yourls_url); it has INSERTs into ["wp_posts"]`,
		},
		{
			name:    "the column list decides, not the name",
			dump:    "INSERT INTO links (`url`,`keyword`,`clicks`) VALUES ('https://example.com/a','a','9');",
			links:   []string{`line 1, row 1 code="a" url=https://example.com/a linkforge.io/imported-visits="9"`},
			skipped: nil,
		},
		{
			name:    "a value that is an expression",
			dump:    create + "INSERT INTO yourls_url VALUES (CONCAT('a','b'),'https://example.com/','','','',0);",
			skipped: []string{"line 2, row 1: keyword or url is an SQL expression, not a value"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			result, err := Parse([]byte(tc.dump), Options{Format: FormatYOURLSSQL, Now: testNow, Table: tc.table})
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
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
			if len(skipped) != len(tc.skipped) {
				t.Fatalf("skipped %q, want %q", skipped, tc.skipped)
			}
			for i := range skipped {
				if !strings.HasPrefix(skipped[i], tc.skipped[i]) {
					t.Errorf("skipped[%d] %q, want it to start with %q", i, skipped[i], tc.skipped[i])
				}
			}
			notes := strings.Join(result.Notes, "\n")
			for _, want := range tc.notes {
				if !strings.Contains(notes, want) {
					t.Errorf("notes %q lack %q", result.Notes, want)
				}
			}
		})
	}
}
