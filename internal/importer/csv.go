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
	columnShortURL       // the full short URL; its path is the code
	columnCustomShortURL // Bitly's custom bitlinks: preferred to the bitlink
	columnDomain
	columnExpires
	columnValidSince
	columnMaxUses
	columnVisits
	columnForwardQuery
	columnTitle
	columnTags
)

// columnSet describes the header of one CSV flavour. Names are compared
// after normalizeColumn, so "Long URL", "longUrl" and "long_url" are one
// name (Shlink's importer ignores case and spaces; '_' and '-' go too).
type columnSet struct {
	format  Format
	columns map[string]column // normalized name -> meaning
	// match, when set, maps the names columns lacks (Bitly's export is
	// read loosely, by what its column names contain).
	match func(normalized string) (column, bool)
	// required lists, for each required thing, the columns that carry it.
	required [][]string
	// strictUnknown makes an unknown column an error: in a hand-written CSV
	// it is most likely a typo ("expiry") whose values would be lost. In an
	// export it is a column of a newer version, reported as a note.
	strictUnknown bool
	// firstWins keeps the first of two columns with one meaning instead of
	// refusing the header: for loose matching, where "Clicks" and "Clicks
	// (7 days)" may both match.
	firstWins  bool
	documented string // the column names, for messages
	// tags splits a cell of tags; nil is splitTags.
	tags func(string) []string
}

// headerURL is the column of the target URL, in linkforge's CSV and YOURLS'.
const headerURL = "url"

// genericColumns is linkforge's own CSV: url,code,expires,max_uses.
var genericColumns = columnSet{
	format: FormatCSV,
	columns: map[string]column{
		headerURL: columnURL,
		"code":    columnCode,
		"expires": columnExpires,
		"maxuses": columnMaxUses,
	},
	required:      [][]string{{headerURL}},
	strictUnknown: true,
	documented:    "url, code, expires, max_uses",
}

// yourlsTableColumns is the yourls_url table with a header row, as
// phpMyAdmin's CSV export writes it (YOURLS includes/functions-install.php:
// keyword, url, title, timestamp, ip, clicks).
var yourlsTableColumns = columnSet{
	format: FormatYOURLSTable,
	columns: map[string]column{
		"keyword":   columnCode,
		headerURL:   columnURL,
		"title":     columnTitle,
		"timestamp": columnIgnored,
		"ip":        columnIgnored,
		"clicks":    columnVisits,
	},
	required:   [][]string{{"keyword"}, {headerURL}},
	documented: "keyword, url, title, timestamp, ip, clicks",
}

// yourlsPluginColumns is the CSV of the YOURLS-Import-Export plugin
// (fileio/csv.php): source,target,hits with source "/keyword/".
var yourlsPluginColumns = columnSet{
	format: FormatYOURLSCSV,
	columns: map[string]column{
		"source": columnShortURL,
		"target": columnURL,
		"hits":   columnVisits,
	},
	required:   [][]string{{"source"}, {"target"}},
	documented: "source, target, hits",
}

// shlinkImporterColumns is the CSV `shlink short-url:import csv` reads
// (shlink-importer src/Sources/Csv/CsvImporter.php): Long URL, Short code
// or Short URL, Domain, Title, Tags. The API's field names (validSince,
// validUntil, maxVisits, visits, forwardQuery) are read too, for CSVs made
// by hand from the API.
var shlinkImporterColumns = columnSet{
	format: FormatShlinkCSV,
	columns: map[string]column{
		"longurl":      columnURL,
		"shortcode":    columnCode,
		"shorturl":     columnShortURL,
		"domain":       columnDomain,
		"title":        columnTitle,
		"tags":         columnTags,
		"validuntil":   columnExpires,
		"validsince":   columnValidSince,
		"maxvisits":    columnMaxUses,
		"visits":       columnVisits,
		"visitscount":  columnVisits,
		"forwardquery": columnForwardQuery,
		"createdat":    columnIgnored,
		"datecreated":  columnIgnored,
		"crawlable":    columnIgnored,
	},
	required:   [][]string{{"longurl"}},
	documented: "Long URL, Short code, Short URL, Domain, Title, Tags (and validSince, validUntil, maxVisits, visits, forwardQuery)",
}

// shlinkExportColumns is the CSV the Shlink web client's "Export" button
// writes (shlink-web-component src/short-urls/helpers/ExportShortUrlsBtn.tsx):
// createdAt, domain, shortCode, shortUrl, longUrl, title, tags, visits; the
// older layout (shlink-web-client 3.6-3.10) lacks domain and shortCode and
// joins tags with ','.
var shlinkExportColumns = columnSet{
	format: FormatShlinkExport,
	columns: map[string]column{
		"createdat": columnIgnored,
		"domain":    columnDomain,
		"shortcode": columnCode,
		"shorturl":  columnShortURL,
		"longurl":   columnURL,
		"title":     columnTitle,
		"tags":      columnTags,
		"visits":    columnVisits,
	},
	required:   [][]string{{"longurl"}, {"shortcode", "shorturl"}},
	documented: "createdAt, domain, shortCode, shortUrl, longUrl, title, tags, visits",
}

// dubColumns is dub's links export (apps/web/lib/zod/schemas/links.ts,
// exportLinksColumns): the labels of today's export ("Short link",
// "Destination URL", ...) and the column ids of the older one (link, url,
// ...). Tags are joined with ", ".
var dubColumns = columnSet{
	format: FormatDubCSV,
	columns: map[string]column{
		"shortlink":      columnShortURL,
		"link":           columnShortURL,
		"destinationurl": columnURL,
		headerURL:        columnURL,
		"clicks":         columnVisits,
		"tags":           columnTags,
		"leads":          columnIgnored,
		"conversions":    columnIgnored,
		"revenue":        columnIgnored,
		"saleamount":     columnIgnored,
		"createdat":      columnIgnored,
		"updatedat":      columnIgnored,
		"linkid":         columnIgnored,
		"id":             columnIgnored,
		"archived":       columnIgnored,
	},
	required:   [][]string{{"shortlink", "link"}, {"destinationurl", headerURL}},
	documented: "Short link, Destination URL, Clicks, Leads, Conversions, Revenue, Created at, Link ID, Updated at, Tags, Archived",
	tags:       dubTags,
}

// dubTags splits dub's "a, b" and undoes its guard against spreadsheet
// formulas (apps/web/lib/analytics/utils/convert-to-csv.ts), which writes a
// "'" before a cell that starts with = + - or @.
func dubTags(cell string) []string {
	if len(cell) > 1 && cell[0] == '\'' && strings.ContainsRune("=+-@", rune(cell[1])) {
		cell = cell[1:]
	}
	return splitTags(cell)
}

// bitlyColumns reads a Bitly CSV loosely: its column names are not
// documented and have changed, so a column is recognized by what its
// normalized name contains.
var bitlyColumns = columnSet{
	format:     FormatBitlyCSV,
	columns:    map[string]column{},
	match:      matchBitlyColumn,
	required:   [][]string{{"<long URL>"}, {"<bitlink>"}},
	firstWins:  true,
	documented: "a long URL (Long URL, Destination), a short link (Bitlink, Short link, Custom bitlink), Title, Tags, Clicks, Expiration",
}

func matchBitlyColumn(name string) (column, bool) {
	has := func(parts ...string) bool {
		for _, part := range parts {
			if strings.Contains(name, part) {
				return true
			}
		}
		return false
	}
	switch {
	case has("longurl", "destination", "originalurl", "target") || name == headerURL:
		return columnURL, true
	case has("custom"):
		return columnCustomShortURL, true
	case has("bitlink", "shortlink", "shorturl", "bitly") || name == "link":
		return columnShortURL, true
	case has("title"):
		return columnTitle, true
	case has("tag"):
		return columnTags, true
	case has("click", "engagement"):
		return columnVisits, true
	case has("expir"):
		return columnExpires, true
	case has("created", "date", "archived", "hidden", "qr", "group", "id", "campaign", "channel"):
		return columnIgnored, true
	}
	return 0, false
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

// sniffDelimiter picks ',' ';' or tab, whichever the header line (outside
// quotes) has most of: Shlink's importer takes ';' as well as ',', and
// spreadsheets in many locales write ';'.
func sniffDelimiter(data []byte) rune {
	counts := map[rune]int{}
	inQuotes := false
	for _, b := range data {
		if b == '\n' && !inQuotes {
			break
		}
		switch b {
		case '"':
			inQuotes = !inQuotes
		case ',', ';', '\t':
			if !inQuotes {
				counts[rune(b)]++
			}
		}
	}
	best := ','
	for _, r := range []rune{';', '\t'} {
		if counts[r] > counts[best] {
			best = r
		}
	}
	return best
}

func newCSVReader(in io.Reader, delimiter rune) *csv.Reader {
	r := csv.NewReader(in)
	r.Comma = delimiter
	// Rows of the wrong width are reported one by one rather than failing
	// the whole file.
	r.FieldsPerRecord = -1
	// Each row is handed on as its fields (strings of their own), so the
	// record's slice can be reused.
	r.ReuseRecord = true
	return r
}

// csvHeader reads the header row, for Detect.
func csvHeader(data []byte) ([]string, error) {
	return newCSVReader(bytes.NewReader(data), sniffDelimiter(data)).Read()
}

func (set columnSet) lookup(normalized string) (column, bool) {
	if meaning, ok := set.columns[normalized]; ok {
		return meaning, true
	}
	if set.match != nil {
		return set.match(normalized)
	}
	return 0, false
}

func (p *parser) readCSV(in io.Reader, set columnSet) error {
	r := newCSVReader(in, p.delimiter)
	header, err := r.Read()
	if errors.Is(err, io.EOF) {
		return fmt.Errorf("the input is empty: a %s file starts with a header row (%s)", set.format.displayName(), set.documented)
	}
	if err != nil {
		return fmt.Errorf("cannot read the CSV header: %v", err)
	}
	header = append([]string(nil), header...) // the reader reuses its record

	index := map[column]int{}
	seen := map[string]string{}
	var unknown, extra []string
	for i, name := range header {
		normalized := normalizeColumn(name)
		if earlier, dup := seen[normalized]; dup {
			return fmt.Errorf("column %q appears twice in the header (also as %q): keep one", name, earlier)
		}
		seen[normalized] = name
		meaning, known := set.lookup(normalized)
		if !known {
			unknown = append(unknown, name)
			continue
		}
		if meaning == columnIgnored {
			continue
		}
		if _, taken := index[meaning]; taken {
			if set.firstWins {
				extra = append(extra, name)
				continue
			}
			// Two spellings of one thing (visits and visitsCount): which to
			// believe is the user's call.
			return fmt.Errorf("columns %q and %q mean the same thing: keep one", header[index[meaning]], name)
		}
		index[meaning] = i
	}
	if len(unknown) > 0 {
		if set.strictUnknown {
			return fmt.Errorf("unknown column(s) %q in the header: the %s columns are %s", unknown, set.format.displayName(), set.documented)
		}
		p.note("ignored column(s) %q: not %s columns linkforge knows (%s)", unknown, set.format.displayName(), set.documented)
	}
	if len(extra) > 0 {
		p.note("ignored column(s) %q: an earlier column already gives the same thing", extra)
	}
	for _, alternatives := range set.required {
		found := false
		for _, name := range alternatives {
			if _, ok := seen[name]; ok {
				found = true
			}
		}
		if set.match != nil {
			found = requiredByMeaning(alternatives[0], index)
		}
		if !found {
			return fmt.Errorf("the header %q has no %s column: a %s file needs it (columns: %s)", header, strings.Join(alternatives, " or "), set.format.displayName(), set.documented)
		}
	}
	if set.format == FormatShlinkCSV {
		// A file for Shlink's importer makes links: where it gives no code,
		// Shlink makes one up, and so does linkforge.
		p.codeRequired = false
	}
	splitCell := set.tags
	if splitCell == nil {
		splitCell = splitTags
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
		rw := row{
			position:     pos,
			url:          cell(columnURL),
			code:         cell(columnCode),
			shortURL:     cell(columnShortURL),
			domain:       cell(columnDomain),
			expires:      cell(columnExpires),
			validSince:   cell(columnValidSince),
			maxUses:      cell(columnMaxUses),
			visits:       cell(columnVisits),
			forwardQuery: cell(columnForwardQuery),
			title:        cell(columnTitle),
		}
		if custom := cell(columnCustomShortURL); custom.set {
			// Several custom bitlinks are separated by commas or spaces;
			// the first is the link's.
			first := strings.FieldsFunc(custom.value, func(r rune) bool { return r == ',' || unicode.IsSpace(r) })[0]
			rw.shortURL = field{name: custom.name, value: first, set: true}
		}
		if tags := cell(columnTags); tags.set {
			rw.tags = splitCell(tags.value)
		}
		p.add(rw)
	}
}

// requiredByMeaning checks a loosely matched header: "<long URL>" needs a
// URL column, "<bitlink>" a short link column.
func requiredByMeaning(placeholder string, index map[column]int) bool {
	has := func(c column) bool { _, ok := index[c]; return ok }
	switch placeholder {
	case "<long URL>":
		return has(columnURL)
	case "<bitlink>":
		return has(columnShortURL) || has(columnCustomShortURL)
	}
	return false
}

func allEmpty(record []string) bool {
	for _, cell := range record {
		if strings.TrimSpace(cell) != "" {
			return false
		}
	}
	return true
}
