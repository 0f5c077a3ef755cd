package importer

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
)

// column says what a CSV column carries into a ShortLink.
type column int

const (
	columnIgnored column = iota // known to the format, but nothing a ShortLink keeps
	columnURL
	columnCode
	columnExpires
	columnValidSince
	columnMaxUses
	columnVisits
	columnForwardQuery
)

// columnSet describes the header of one CSV flavour. Names are compared
// after normalizeColumn, so "Long URL", "longUrl" and "long_url" are one name.
type columnSet struct {
	format   string            // for messages
	columns  map[string]column // normalized name -> meaning
	required []string          // normalized names that must be present
	// strictUnknown makes an unknown column an error: in a hand-written CSV
	// it is most likely a typo ("expiry") whose values would be lost. In an
	// export it is a column of a newer version, reported as a note.
	strictUnknown bool
	documented    string // the documented column names, for messages
}

// headerURL is the column of the target URL, in linkforge's CSV and YOURLS'.
const headerURL = "url"

// genericColumns is linkforge's own CSV: url,code,expires,max_uses.
var genericColumns = columnSet{
	format: "linkforge CSV",
	columns: map[string]column{
		headerURL: columnURL,
		"code":    columnCode,
		"expires": columnExpires,
		"maxuses": columnMaxUses,
	},
	required:      []string{headerURL},
	strictUnknown: true,
	documented:    "url, code, expires, max_uses",
}

// yourlsColumns is the yourls_url table (a CSV dump of it, with a header):
// keyword,url,title,timestamp,ip,clicks. YOURLS has no expiry or visit
// limit; clicks are past visits and limit nothing.
var yourlsColumns = columnSet{
	format: "YOURLS",
	columns: map[string]column{
		"keyword":   columnCode,
		headerURL:   columnURL,
		"title":     columnIgnored,
		"timestamp": columnIgnored,
		"ip":        columnIgnored,
		"clicks":    columnIgnored,
	},
	required:   []string{"keyword", headerURL},
	documented: "keyword, url, title, timestamp, ip, clicks",
}

// shlinkColumns covers the CSV of the Shlink web client's export (createdAt,
// domain, shortCode, shortUrl, longUrl, title, tags, visits) and the columns
// of `shlink short-url:list` (Short Code, Title, Short URL, Long URL, Date
// created, Visits count, ...), plus the API's field names (validSince,
// validUntil, maxVisits, forwardQuery) for hand-made CSVs. These column lists
// are written from the projects' documentation and source, not from sample
// files.
var shlinkColumns = columnSet{
	format: "Shlink",
	columns: map[string]column{
		"shortcode":    columnCode,
		"longurl":      columnURL,
		"validuntil":   columnExpires,
		"validsince":   columnValidSince,
		"maxvisits":    columnMaxUses,
		"visits":       columnVisits,
		"visitscount":  columnVisits,
		"forwardquery": columnForwardQuery,
		"shorturl":     columnIgnored,
		"createdat":    columnIgnored,
		"datecreated":  columnIgnored,
		"title":        columnIgnored,
		"tags":         columnIgnored,
		"domain":       columnIgnored,
		"crawlable":    columnIgnored,
	},
	required:   []string{"shortcode", "longurl"},
	documented: "shortCode, longUrl, validSince, validUntil, maxVisits, visits, forwardQuery (shortUrl, createdAt, title, tags, domain, crawlable are ignored)",
}

// normalizeColumn lower-cases a column name and drops spaces, '_' and '-'.
func normalizeColumn(name string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || r == '_' || r == '-' {
			return -1
		}
		return unicode.ToLower(r)
	}, name)
}

func (p *parser) readCSV(data []byte, set columnSet) error {
	r := csv.NewReader(bytes.NewReader(data))
	// Rows of the wrong width are reported one by one below rather than
	// failing the whole file.
	r.FieldsPerRecord = -1
	header, err := r.Read()
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("the input is empty: a %s file starts with a header row (%s)", set.format, set.documented)
	}
	if err != nil {
		return fmt.Errorf("cannot read the CSV header: %v", err)
	}

	index := map[column]int{}
	seen := map[string]string{}
	var unknown []string
	for i, name := range header {
		normalized := normalizeColumn(name)
		if earlier, dup := seen[normalized]; dup {
			return fmt.Errorf("column %q appears twice in the header (also as %q): keep one", name, earlier)
		}
		seen[normalized] = name
		meaning, known := set.columns[normalized]
		if !known {
			unknown = append(unknown, name)
			continue
		}
		if meaning == columnIgnored {
			continue
		}
		if _, taken := index[meaning]; taken {
			// Two spellings of one thing (visits and visitsCount): which to
			// believe is the user's call.
			return fmt.Errorf("columns %q and %q mean the same thing: keep one", header[index[meaning]], name)
		}
		index[meaning] = i
	}
	if len(unknown) > 0 {
		if set.strictUnknown {
			return fmt.Errorf("unknown column(s) %q in the header: the %s columns are %s", unknown, set.format, set.documented)
		}
		p.note("ignored column(s) %q: not %s columns linkforge knows (%s)", unknown, set.format, set.documented)
	}
	for _, name := range set.required {
		if _, ok := seen[name]; !ok {
			return fmt.Errorf("the header %q has no %s column: a %s file needs it (columns: %s)", header, name, set.format, set.documented)
		}
	}

	for {
		record, err := r.Read()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			// After a quoting error the reader cannot tell where the next
			// row starts, so reading on could invent rows.
			var parseErr *csv.ParseError
			line := 0
			if errors.As(err, &parseErr) {
				line, err = parseErr.StartLine, parseErr.Err
			}
			p.skip(Position{Line: line}, "CSV syntax error: %v; this row and the rest of the file were not read (quote a cell that contains a comma or a double quote, doubling the quote)", err)
			return nil
		}
		line, _ := r.FieldPos(0)
		if allEmpty(record) {
			continue
		}
		pos := Position{Line: line}
		if len(record) != len(header) {
			p.skip(pos, "the row has %d cell(s) but the header has %d column(s) %q: add the missing cells (empty means unset) or remove the extra ones", len(record), len(header), header)
			continue
		}
		cell := func(meaning column) field {
			i, ok := index[meaning]
			if !ok {
				return field{}
			}
			return newField(header[i], record[i])
		}
		p.add(row{
			position:     pos,
			url:          cell(columnURL),
			code:         cell(columnCode),
			expires:      cell(columnExpires),
			validSince:   cell(columnValidSince),
			maxUses:      cell(columnMaxUses),
			visits:       cell(columnVisits),
			forwardQuery: cell(columnForwardQuery),
		})
	}
}

func allEmpty(record []string) bool {
	for _, cell := range record {
		if strings.TrimSpace(cell) != "" {
			return false
		}
	}
	return true
}
