// Package importer reads the exports of other URL shorteners (YOURLS, Shlink)
// and a plain CSV, and turns them into linkforge ShortLink manifests.
//
// It is pure: bytes in, links and per-row errors out. The CLI
// (cmd/linkforge import) does the file I/O, so every rule here is testable
// with in-memory fixtures.
//
// A row is either imported as a Link or reported as a RowError with its
// position (CSV line number or JSON path) and the reason; none is dropped
// silently. The only rows skipped without a report are CSV rows whose cells
// are all empty, which spreadsheets append and which hold no link.
package importer

import (
	"bytes"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/linkforge/linkforge/internal/shortcode"
)

// Format names an input format.
type Format string

// The input formats. YOURLS and Shlink each come as CSV or JSON; which one is
// decided from the content.
const (
	FormatCSV    Format = "csv"
	FormatYOURLS Format = "yourls"
	FormatShlink Format = "shlink"
)

func (f Format) displayName() string {
	switch f {
	case FormatYOURLS:
		return "YOURLS"
	case FormatShlink:
		return "Shlink"
	}
	return "linkforge " + strings.ToUpper(string(f))
}

// Formats lists the formats in the order Detect tries them, for usage texts.
var Formats = []Format{FormatCSV, FormatYOURLS, FormatShlink}

// Link is one importable short link, validated.
type Link struct {
	Position     Position
	URL          string // as written, trimmed; the controller canonicalizes it again
	CanonicalURL string // shortcode.Canonicalize(URL), for names of links without a code
	Code         string // custom code; "" lets the controller compute one
	ExpiresAt    *time.Time
	ActivatesAt  *time.Time // Shlink's validSince, when it is still to come
	MaxUses      *int64
	ForwardQuery bool
}

// Position is where a row is in the input: a 1-based CSV line, or a JSON path
// such as shortUrls.data[3].
type Position struct {
	Line int
	Path string
}

func (p Position) String() string {
	if p.Path != "" {
		return p.Path
	}
	return "line " + strconv.Itoa(p.Line)
}

// RowError is a row that was skipped, and why.
type RowError struct {
	Position Position
	Reason   string
}

func (e RowError) Error() string { return e.Position.String() + ": " + e.Reason }

// Result is what Parse found.
type Result struct {
	Format  Format
	Links   []Link
	Skipped []RowError
	// Notes are things the user should know that skip no row, such as
	// columns that were ignored.
	Notes []string
}

// codePattern is the CRD's pattern for spec.code (api/v1alpha1).
var codePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// Parse reads data in format (guessed with Detect when format is "").
// Expiry times before now are reported, not imported. The error is for
// input that cannot be read at all (unknown format, missing required
// column); row problems are in Result.Skipped.
func Parse(data []byte, format Format, now time.Time) (*Result, error) {
	// Spreadsheet programs start UTF-8 CSV with a byte order mark; it would
	// otherwise become part of the first column's name.
	data = bytes.TrimPrefix(data, utf8BOM)
	if format == "" {
		var err error
		if format, err = Detect(data); err != nil {
			return nil, err
		}
	}
	p := &parser{
		result:    &Result{Format: format},
		now:       now,
		codeFirst: map[string]Position{},
		// Every YOURLS and Shlink link has a code, and the point of the
		// import is that its short URL keeps working.
		codeRequired: format == FormatYOURLS || format == FormatShlink,
	}
	var err error
	switch format {
	case FormatCSV:
		err = p.readCSV(data, genericColumns)
	case FormatYOURLS:
		if looksLikeJSON(data) {
			err = p.readYOURLSJSON(data)
		} else {
			err = p.readCSV(data, yourlsColumns)
		}
	case FormatShlink:
		if looksLikeJSON(data) {
			err = p.readShlinkJSON(data)
		} else {
			err = p.readCSV(data, shlinkColumns)
		}
	default:
		return nil, fmt.Errorf("unknown format %q: use one of %s", format, formatList())
	}
	if err != nil {
		return nil, err
	}
	return p.result, nil
}

func formatList() string {
	names := make([]string, len(Formats))
	for i, f := range Formats {
		names[i] = string(f)
	}
	return strings.Join(names, ", ")
}

func looksLikeJSON(data []byte) bool {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	return len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[')
}

// Detect guesses the format from the content: JSON is Shlink (an API body or
// an array of short URLs with shortCode/longUrl) or YOURLS (an array of rows
// with keyword); CSV is told apart by its header. The error says what was
// tried, so the user knows which --format to pass.
func Detect(data []byte) (Format, error) {
	data = bytes.TrimPrefix(data, utf8BOM)
	if looksLikeJSON(data) {
		var top any
		if err := json.Unmarshal(data, &top); err != nil {
			return "", fmt.Errorf("cannot tell the format: the input starts like JSON but is not valid JSON (%v); fix it or pass --format", err)
		}
		var first map[string]any
		switch v := top.(type) {
		case map[string]any:
			if _, ok := v["shortUrls"]; ok {
				return FormatShlink, nil
			}
			first = v
		case []any:
			if len(v) > 0 {
				first, _ = v[0].(map[string]any)
			}
		}
		if first != nil {
			if _, ok := first["keyword"]; ok {
				return FormatYOURLS, nil
			}
			_, hasCode := first["shortCode"]
			_, hasURL := first["longUrl"]
			if hasCode || hasURL {
				return FormatShlink, nil
			}
		}
		return "", errors.New(`cannot tell the format: tried JSON, but it is neither a Shlink API body ({"shortUrls":{"data":[...]}}) nor an array of Shlink short URLs (shortCode, longUrl) or YOURLS rows (keyword, url); pass --format yourls or --format shlink`)
	}
	header, err := csv.NewReader(bytes.NewReader(data)).Read()
	if err != nil {
		return "", fmt.Errorf("cannot tell the format: tried JSON (it does not start with { or [) and CSV (no header row: %v); pass --format", err)
	}
	names := map[string]bool{}
	for _, h := range header {
		names[normalizeColumn(h)] = true
	}
	switch {
	case names["keyword"]:
		return FormatYOURLS, nil
	case names["shortcode"] || names["longurl"]:
		return FormatShlink, nil
	case names[headerURL]:
		return FormatCSV, nil
	}
	return "", fmt.Errorf("cannot tell the format: tried JSON (it does not start with { or [) and CSV, whose header %q has no url column (linkforge CSV), no keyword column (YOURLS) and no shortCode or longUrl column (Shlink); fix the header or pass --format", header)
}

// field is one input value and the name it has in the input, so that
// messages speak the user's column names (max_uses, maxVisits, ...).
type field struct {
	name  string
	value string
	set   bool // present and non-empty; an empty cell means unset
}

func newField(name, value string) field {
	value = strings.TrimSpace(value)
	return field{name: name, value: value, set: value != ""}
}

// row is one input record, before validation, in linkforge's terms.
type row struct {
	position     Position
	url          field
	code         field
	expires      field
	validSince   field // Shlink: the link is not served before this instant
	maxUses      field
	visits       field // Shlink: visits already counted against maxUses
	forwardQuery field
}

type parser struct {
	result    *Result
	now       time.Time
	codeFirst map[string]Position // code -> the row that imported it first
	// codeRequired is set for the shorteners' exports: their links have
	// codes, and an import without one would break the old short URL.
	codeRequired bool
}

func (p *parser) skip(pos Position, format string, args ...any) {
	p.result.Skipped = append(p.result.Skipped, RowError{Position: pos, Reason: fmt.Sprintf(format, args...)})
}

func (p *parser) note(format string, args ...any) {
	p.result.Notes = append(p.result.Notes, fmt.Sprintf(format, args...))
}

// add validates r and imports it as a Link or reports why not.
func (p *parser) add(r row) {
	link := Link{Position: r.position}

	if !r.url.set {
		p.skip(r.position, "%s is empty: every link needs a target URL", r.url.name)
		return
	}
	canonical, err := shortcode.Canonicalize(r.url.value)
	if err != nil {
		// %q keeps control characters of a bad URL off the terminal.
		p.skip(r.position, "invalid %s %q: %v", r.url.name, r.url.value, err)
		return
	}
	link.URL, link.CanonicalURL = r.url.value, canonical

	if !r.code.set && p.codeRequired {
		p.skip(r.position, "%s is empty: a %s link keeps its code, so that its short URL keeps working", r.code.name, p.result.Format.displayName())
		return
	}
	if r.code.set {
		if !codePattern.MatchString(r.code.value) {
			p.skip(r.position, "invalid %s %q: a code is 1-64 characters of A-Z a-z 0-9 _ -", r.code.name, r.code.value)
			return
		}
		link.Code = r.code.value
	}

	if r.expires.set {
		at, err := parseTime(r.expires)
		if err != nil {
			p.skip(r.position, "%v", err)
			return
		}
		if !at.After(p.now) {
			p.skip(r.position, "already expired: %s %s is in the past; only live links are imported", r.expires.name, r.expires.value)
			return
		}
		link.ExpiresAt = &at
	}

	if r.validSince.set {
		since, err := parseTime(r.validSince)
		if err != nil {
			p.skip(r.position, "%v", err)
			return
		}
		// A start still to come is spec.activatesAt; a past one changes nothing.
		if since.After(p.now) {
			if link.ExpiresAt != nil && !since.Before(*link.ExpiresAt) {
				p.skip(r.position, "never valid: %s %s is not before %s %s", r.validSince.name, r.validSince.value, r.expires.name, r.expires.value)
				return
			}
			link.ActivatesAt = &since
		}
	}

	if r.maxUses.set {
		maxUses, err := strconv.ParseInt(r.maxUses.value, 10, 64)
		if err != nil || maxUses < 1 {
			p.skip(r.position, "invalid %s %q: a whole number of at least 1; leave it empty for no limit", r.maxUses.name, r.maxUses.value)
			return
		}
		// A Shlink link keeps its visit budget: the ShortLink starts counting
		// uses at 0, so it gets what is left, not the original limit.
		if r.visits.set {
			visits, err := strconv.ParseInt(r.visits.value, 10, 64)
			if err != nil || visits < 0 {
				p.skip(r.position, "invalid %s %q: a whole number of at least 0", r.visits.name, r.visits.value)
				return
			}
			if visits >= maxUses {
				p.skip(r.position, "already exhausted: %s %d and %d visits counted; only live links are imported", r.maxUses.name, maxUses, visits)
				return
			}
			maxUses -= visits
		}
		link.MaxUses = &maxUses
	}

	if r.forwardQuery.set {
		forward, err := strconv.ParseBool(r.forwardQuery.value)
		if err != nil {
			p.skip(r.position, "invalid %s %q: true or false", r.forwardQuery.name, r.forwardQuery.value)
			return
		}
		link.ForwardQuery = forward
	}

	// Last, so that a row skipped for another reason does not claim its code.
	if link.Code != "" {
		if first, dup := p.codeFirst[link.Code]; dup {
			p.skip(r.position, "duplicate %s %q: %s already has it; a code is unique in a namespace", r.code.name, link.Code, first)
			return
		}
		p.codeFirst[link.Code] = r.position
	}
	p.result.Links = append(p.result.Links, link)
}

func parseTime(f field) (time.Time, error) {
	at, err := time.Parse(time.RFC3339, f.value)
	if err != nil {
		return time.Time{}, fmt.Errorf("invalid %s %q: want an RFC 3339 time such as 2026-12-31T23:59:59Z", f.name, f.value)
	}
	return at, nil
}
