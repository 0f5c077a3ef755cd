// Package importer reads the files other URL shorteners write (YOURLS,
// Shlink, Bitly, dub, Kutt, Sink) and linkforge's own CSV, and turns them
// into ShortLink manifests.
//
// It is pure: a stream of bytes in, links and per-row errors out. The CLI
// (cmd/linkforge import) opens the file and, with --apply, package
// internal/importapply talks to the cluster, so every rule here is testable
// with in-memory fixtures. testdata/README.md names the upstream writer each
// fixture follows.
//
// The input is read as it streams (Read): the importer holds the links it
// imports and a bounded window of the input (detectPeek, and each reader's
// buffer), never the whole file, and of an SQL dump it reads only the
// tables of links. TestReadBigDumpMemory measures the bound.
//
// A row is either imported as a Link or reported as a RowError with its
// position (line, or JSON path) and the reason; none is dropped silently.
// The only rows skipped without a report are CSV rows whose cells are all
// empty, which spreadsheets append and which hold no link.
package importer

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/url"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/linkforge/linkforge/internal/shortcode"
)

// Format names an input format: a family (the shortener) and a shape.
type Format string

// The input formats. Each is told apart from the others by its content
// (Detect); the names are what --format takes.
const (
	FormatCSV          Format = "csv"           // linkforge's own CSV
	FormatYOURLSSQL    Format = "yourls-sql"    // SQL dump of the yourls_url table
	FormatYOURLSTable  Format = "yourls-table"  // the yourls_url table as CSV with a header, or a JSON array of its rows
	FormatYOURLSCSV    Format = "yourls-csv"    // YOURLS-Import-Export plugin CSV
	FormatYOURLSXML    Format = "yourls-xml"    // YOURLS-Import-Export plugin XML
	FormatYOURLSAPI    Format = "yourls-api"    // YOURLS API JSON: stats, or shlink-list of the Shlink import plugin
	FormatShlinkCSV    Format = "shlink-csv"    // Shlink importer's CSV
	FormatShlinkExport Format = "shlink-export" // Shlink web client's CSV export
	FormatShlinkAPI    Format = "shlink-api"    // Shlink REST API short URL list
	FormatBitlyAPI     Format = "bitly-api"     // Bitly API v4 links list
	FormatBitlyCSV     Format = "bitly-csv"     // Bitly CSV export, by column names
	FormatDubCSV       Format = "dub-csv"       // dub links CSV export
	FormatKuttAPI      Format = "kutt-api"      // Kutt API v2 links list
	FormatSinkJSON     Format = "sink-json"     // Sink export JSON
)

// Formats lists every format, for usage texts and --format.
var Formats = []Format{
	FormatCSV,
	FormatYOURLSSQL, FormatYOURLSTable, FormatYOURLSCSV, FormatYOURLSXML, FormatYOURLSAPI,
	FormatShlinkCSV, FormatShlinkExport, FormatShlinkAPI,
	FormatBitlyAPI, FormatBitlyCSV,
	FormatDubCSV,
	FormatKuttAPI,
	FormatSinkJSON,
}

// Family is the shortener: "yourls" for yourls-sql. --format takes a family
// too, and then the shape is detected within it.
func (f Format) Family() string {
	family, _, _ := strings.Cut(string(f), "-")
	return family
}

// Families lists the shorteners, for --format.
func Families() []string {
	var out []string
	for _, f := range Formats {
		if f != FormatCSV && !contains(out, f.Family()) {
			out = append(out, f.Family())
		}
	}
	return out
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// Known reports whether name is a format or a family --format accepts.
func Known(name string) bool {
	for _, f := range Formats {
		if string(f) == name {
			return true
		}
	}
	return contains(Families(), name)
}

// FormatNames is every --format value, for messages.
func FormatNames() string {
	names := make([]string, 0, len(Formats)+len(Families()))
	for _, f := range Formats {
		names = append(names, string(f))
	}
	names = append(names, Families()...)
	return strings.Join(names, ", ")
}

func (f Format) displayName() string {
	switch f.Family() {
	case "yourls":
		return "YOURLS"
	case "shlink":
		return "Shlink"
	case "bitly":
		return "Bitly"
	case "dub":
		return "dub"
	case "kutt":
		return "Kutt"
	case "sink":
		return "Sink"
	}
	return "linkforge CSV"
}

// Annotations and labels an import writes.
const (
	// TitleAnnotation holds the link's title in the old shortener.
	TitleAnnotation = "linkforge.io/title"
	// VisitsAnnotation holds how many visits the old shortener had counted.
	// A ShortLink's status.uses starts at 0 and belongs to the redirectors,
	// so the history is kept here, for people; maxUses already has those
	// visits taken off (Link.MaxUses).
	VisitsAnnotation = "linkforge.io/imported-visits"
	// TagLabelPrefix starts the label of each tag: tag.linkforge.io/<tag>=true.
	TagLabelPrefix = "tag.linkforge.io/"
	// SourceAnnotation records the import a link came from: the file's
	// name and the SHA-256 of its bytes (links.csv@sha256:0123456789abcdef),
	// or what --source named. `linkforge import --apply` changes only the
	// links that carry its own source (package importapply).
	SourceAnnotation = "linkforge.io/import-source"
)

// Link is one importable short link, validated.
type Link struct {
	Position     Position
	URL          string // as written, trimmed; the controller canonicalizes it again
	CanonicalURL string // shortcode.Canonicalize(URL), for names of links without a code
	Code         string // custom code; "" lets the controller compute one
	ExpiresAt    *time.Time
	ActivatesAt  *time.Time // Shlink's validSince, when it is still to come
	MaxUses      *int64     // what is left of the old limit: visits already served are taken off
	ForwardQuery bool
	// Domain is the short domain the link was served on, lower-case; ""
	// when the input does not say (or it is the default domain).
	Domain string
	// Namespace is where --domain puts the link; "" is the default one.
	Namespace   string
	Labels      map[string]string // tags, as tag.linkforge.io/<tag>: "true"
	Annotations map[string]string // title, visits already counted
}

// Position is where a row is in the input: a 1-based line, or a JSON path
// such as shortUrls.data[3].
type Position struct {
	Line int
	Path string
}

func (p Position) String() string {
	if p.Path != "" {
		return Printable(p.Path) // a JSON path holds the input's member names
	}
	return "line " + strconv.Itoa(p.Line)
}

// RowError is a row that was skipped, and why.
type RowError struct {
	Position Position
	Reason   string
}

func (e RowError) Error() string { return Printable(e.Position.String()) + ": " + e.Reason }

// Result is what Parse found.
type Result struct {
	Format  Format
	Links   []Link
	Skipped []RowError
	// Notes are things the user should know that skip no row: ignored
	// columns, tags renamed into labels, pages missing from an API answer.
	Notes []string
}

// Options says how to read the input.
type Options struct {
	// Format is a format, a family (detect within it) or "" (detect).
	Format Format
	// Now judges expiry: links already expired are reported, not imported.
	Now time.Time
	// Domains maps short domains (lower-case hosts) to namespaces. When it
	// is not empty, a link of a domain it lacks is reported, not guessed.
	Domains map[string]string
	// Table is the YOURLS URL table of an SQL dump, when the dump holds
	// more than one (several installs with different prefixes).
	Table string
}

// codePattern is the CRD's pattern for spec.code (api/v1alpha1).
var codePattern = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

var utf8BOM = []byte{0xEF, 0xBB, 0xBF}

// Parse reads data as opts say: Read of data.
func Parse(data []byte, opts Options) (*Result, error) {
	return Read(bytes.NewReader(data), opts)
}

// detectPeek is how much of the input Read looks at before reading it:
// the format is told (and a CSV's delimiter sniffed) from this much. It is
// the start of any export, and it bounds what detection holds.
const detectPeek = 1 << 20

// Read reads the input from in as opts say, as it streams. The error is for
// input that cannot be read at all (unknown format, missing required
// column, broken JSON, a read error); row problems are in Result.Skipped.
// Every message in the error and the Result has been through Printable.
func Read(in io.Reader, opts Options) (*Result, error) {
	result, err := read(in, opts)
	if err != nil {
		return nil, errors.New(Printable(err.Error()))
	}
	return result, nil
}

func read(r io.Reader, opts Options) (*Result, error) {
	prefix, err := io.ReadAll(io.LimitReader(r, detectPeek))
	if err != nil {
		return nil, err
	}
	complete := len(prefix) < detectPeek
	// Spreadsheet programs start UTF-8 CSV with a byte order mark; it would
	// otherwise become part of the first column's name.
	prefix = bytes.TrimPrefix(prefix, utf8BOM)
	in := io.MultiReader(bytes.NewReader(prefix), r)
	format := opts.Format
	if format == "" || !isFormat(format) {
		if format != "" && !Known(string(format)) {
			return nil, fmt.Errorf("unknown format %q: use one of %s", format, FormatNames())
		}
		detected, err := detect(prefix, complete)
		if err != nil {
			return nil, err
		}
		if format != "" && detected.Family() != string(format) {
			return nil, fmt.Errorf("--format %s, but the content is %s (%s); leave --format out, or pass the right one", format, detected, describe(detected))
		}
		format = detected
	}
	domains := map[string]string{}
	for host, ns := range opts.Domains {
		domains[strings.ToLower(host)] = ns
	}
	p := &parser{
		result:    &Result{Format: format},
		now:       opts.Now,
		domains:   domains,
		table:     opts.Table,
		codeFirst: map[string]Position{},
		tagLabels: map[string]string{},
		// Every shortener's link has a code, and the point of the import is
		// that its short URL keeps working.
		codeRequired: format != FormatCSV,
		timeLayouts:  timeLayoutsFor(format),
		counts:       map[string]int{},
	}
	// A CSV's delimiter is sniffed from its header line, and the YOURLS
	// table comes as CSV or JSON: both are told from the start of the input.
	p.delimiter = sniffDelimiter(prefix)
	p.jsonInput = looksLikeJSON(prefix)
	if err := p.read(in); err != nil {
		return nil, err
	}
	p.flushCounts()
	return p.result, nil
}

func isFormat(f Format) bool {
	for _, known := range Formats {
		if known == f {
			return true
		}
	}
	return false
}

func (p *parser) read(in io.Reader) error {
	switch p.result.Format {
	case FormatCSV:
		return p.readCSV(in, genericColumns)
	case FormatYOURLSSQL:
		return p.readSQLDump(in)
	case FormatYOURLSTable:
		if p.jsonInput {
			return p.readYOURLSRows(in)
		}
		return p.readCSV(in, yourlsTableColumns)
	case FormatYOURLSCSV:
		return p.readCSV(in, yourlsPluginColumns)
	case FormatYOURLSXML:
		return p.readYOURLSXML(in)
	case FormatYOURLSAPI:
		return p.readYOURLSAPI(in)
	case FormatShlinkCSV:
		return p.readCSV(in, shlinkImporterColumns)
	case FormatShlinkExport:
		return p.readCSV(in, shlinkExportColumns)
	case FormatShlinkAPI:
		return p.readShlinkJSON(in)
	case FormatBitlyAPI:
		return p.readBitlyJSON(in)
	case FormatBitlyCSV:
		return p.readCSV(in, bitlyColumns)
	case FormatDubCSV:
		return p.readCSV(in, dubColumns)
	case FormatKuttAPI:
		return p.readKuttJSON(in)
	case FormatSinkJSON:
		return p.readSinkJSON(in)
	}
	return fmt.Errorf("unknown format %q: use one of %s", p.result.Format, FormatNames())
}

// timeLayoutsFor lists the time spellings a format's writer uses, RFC 3339
// first. linkforge's CSV takes RFC 3339 only, as documented.
func timeLayoutsFor(f Format) []string {
	switch f {
	case FormatCSV:
		return []string{time.RFC3339}
	}
	return []string{
		time.RFC3339,
		"2006-01-02T15:04:05Z0700", // Bitly: 2020-03-01T00:00:00+0000
		"2006-01-02 15:04:05",      // SQL datetime (Kutt on SQLite), read as UTC
	}
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
	shortURL     field // the full short URL: its path is the code where there is no code field
	domain       field
	expires      field
	validSince   field // Shlink: the link is not served before this instant
	maxUses      field
	visits       field // visits already counted by the old shortener
	forwardQuery field
	title        field
	tags         []string
	// refuse is a reason to skip the row that only its reader knows, such
	// as a password a ShortLink cannot ask for.
	refuse string
}

type parser struct {
	result    *Result
	now       time.Time
	domains   map[string]string
	table     string
	codeFirst map[string]Position // namespace/code -> the row that imported it first
	// codeRequired is set for the shorteners' exports: their links have
	// codes, and an import without one would break the old short URL.
	codeRequired bool
	timeLayouts  []string
	tagLabels    map[string]string // tag -> label key, to report each rename once
	// counts aggregates notes that would otherwise repeat on every row.
	counts     map[string]int
	countOrder []string
	// Told from the start of the input: the CSV delimiter, and whether the
	// input is JSON (the YOURLS table comes as CSV or JSON).
	delimiter rune
	jsonInput bool
}

// skip reports a row. The reason goes through Printable: it quotes input,
// and no input may reach a terminal as escape sequences.
func (p *parser) skip(pos Position, format string, args ...any) {
	p.result.Skipped = append(p.result.Skipped, RowError{Position: pos, Reason: Printable(fmt.Sprintf(format, args...))})
}

func (p *parser) note(format string, args ...any) {
	p.result.Notes = append(p.result.Notes, Printable(fmt.Sprintf(format, args...)))
}

// count adds one to a note that is written once, with its count, at the end:
// "%d" in message is replaced by the count.
func (p *parser) count(message string) {
	if _, ok := p.counts[message]; !ok {
		p.countOrder = append(p.countOrder, message)
	}
	p.counts[message]++
}

func (p *parser) flushCounts() {
	for _, message := range p.countOrder {
		p.note(message, p.counts[message])
	}
}

// add validates r and imports it as a Link or reports why not.
func (p *parser) add(r row) {
	link := Link{Position: r.position}
	if r.refuse != "" {
		p.skip(r.position, "%s", r.refuse)
		return
	}
	code, why := p.target(r, &link)
	if why == "" {
		why = p.times(r, &link)
	}
	var visits *int64
	if why == "" {
		visits, why = p.limits(r, &link)
	}
	// Last, so that a row skipped for another reason does not claim its code.
	if why == "" {
		why = p.claimCode(r.position, code, &link)
	}
	if why != "" {
		p.skip(r.position, "%s", why)
		return
	}

	if r.title.set {
		link.Annotations = map[string]string{TitleAnnotation: r.title.value}
	}
	if visits != nil {
		if link.Annotations == nil {
			link.Annotations = map[string]string{}
		}
		link.Annotations[VisitsAnnotation] = strconv.FormatInt(*visits, 10)
	}
	link.Labels = p.labels(r.tags)
	if link.Code == "" && p.result.Format != FormatCSV {
		p.count("%d link(s) have no code: linkforge computes theirs from the URL")
	}
	if link.Domain != "" && len(p.domains) == 0 {
		// The domain is input and the message a format: its % are doubled.
		// (note escapes what a terminal would act on.)
		domain := strings.ReplaceAll(link.Domain, "%", "%%")
		p.count("%d link(s) of short domain " + domain + " go to the default namespace (map it with --domain " + domain + "=NAMESPACE)")
	}
	p.result.Links = append(p.result.Links, link)
}

// target sets the link's URL, code, domain and namespace from r, or says
// why r is skipped; it returns the field the code came from.
func (p *parser) target(r row, link *Link) (code field, why string) {
	if !r.url.set {
		return code, fmt.Sprintf("%s is empty: every link needs a target URL", fieldName(r.url, "the target URL"))
	}
	canonical, err := shortcode.Canonicalize(r.url.value)
	if err != nil {
		// %q keeps control characters of a bad URL off the terminal.
		return code, fmt.Sprintf("invalid %s %q: %v", r.url.name, r.url.value, err)
	}
	link.URL, link.CanonicalURL = r.url.value, canonical

	code, domain := r.code, r.domain
	if r.shortURL.set {
		host, path, err := splitShortURL(r.shortURL.value)
		if err != nil {
			return code, fmt.Sprintf("invalid %s %q: %v", r.shortURL.name, r.shortURL.value, err)
		}
		if !code.set {
			code = field{name: r.shortURL.name + " (its path)", value: path, set: path != ""}
		}
		if !domain.set && host != "" {
			domain = field{name: r.shortURL.name, value: host, set: true}
		}
	}
	if !code.set && p.codeRequired {
		keeps := fmt.Sprintf("a %s link keeps its code, so that its short URL keeps working", p.result.Format.displayName())
		if r.shortURL.set {
			return code, fmt.Sprintf("%s %q has no path, so no code: %s", r.shortURL.name, r.shortURL.value, keeps)
		}
		return code, fmt.Sprintf("%s is empty: %s", fieldName(code, "the code"), keeps)
	}
	if code.set {
		if !codePattern.MatchString(code.value) {
			return code, fmt.Sprintf("invalid %s %q: a code is 1-64 characters of A-Z a-z 0-9 _ -", code.name, code.value)
		}
		link.Code = code.value
	}

	if domain.set {
		link.Domain = strings.ToLower(domain.value)
		if len(p.domains) > 0 {
			namespace, ok := p.domains[link.Domain]
			if !ok {
				return code, fmt.Sprintf("short domain %s is not mapped to a namespace: add --domain %s=NAMESPACE", link.Domain, link.Domain)
			}
			link.Namespace = namespace
		}
	}
	return code, ""
}

// times sets the link's expiry and activation from r, or says why r is
// skipped.
func (p *parser) times(r row, link *Link) string {
	if r.expires.set {
		at, err := p.parseTime(r.expires)
		if err != nil {
			return err.Error()
		}
		if !at.After(p.now) {
			return fmt.Sprintf("already expired: %s %s is in the past; only live links are imported", r.expires.name, r.expires.value)
		}
		link.ExpiresAt = &at
	}
	if r.validSince.set {
		since, err := p.parseTime(r.validSince)
		if err != nil {
			return err.Error()
		}
		// A start still to come is spec.activatesAt; a past one changes nothing.
		if since.After(p.now) {
			if link.ExpiresAt != nil && !since.Before(*link.ExpiresAt) {
				return fmt.Sprintf("never valid: %s %s is not before %s %s", r.validSince.name, r.validSince.value, r.expires.name, r.expires.value)
			}
			link.ActivatesAt = &since
		}
	}
	return ""
}

// limits sets the link's maxUses and forwardQuery from r and returns the
// visits already counted, or says why r is skipped.
func (p *parser) limits(r row, link *Link) (visits *int64, why string) {
	if r.visits.set {
		n, err := strconv.ParseInt(strings.ReplaceAll(r.visits.value, ",", ""), 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Sprintf("invalid %s %q: a whole number of at least 0", r.visits.name, r.visits.value)
		}
		visits = &n
	}
	if r.maxUses.set {
		maxUses, err := strconv.ParseInt(r.maxUses.value, 10, 64)
		if err != nil || maxUses < 1 {
			return nil, fmt.Sprintf("invalid %s %q: a whole number of at least 1; leave it empty for no limit", r.maxUses.name, r.maxUses.value)
		}
		// A link keeps its visit budget: the ShortLink starts counting uses
		// at 0, so it gets what is left, not the original limit.
		if visits != nil {
			if *visits >= maxUses {
				return nil, fmt.Sprintf("already exhausted: %s %d and %d visits counted; only live links are imported", r.maxUses.name, maxUses, *visits)
			}
			maxUses -= *visits
		}
		link.MaxUses = &maxUses
	}
	if r.forwardQuery.set {
		forward, err := strconv.ParseBool(r.forwardQuery.value)
		if err != nil {
			return nil, fmt.Sprintf("invalid %s %q: true or false", r.forwardQuery.name, r.forwardQuery.value)
		}
		link.ForwardQuery = forward
	}
	return visits, ""
}

// claimCode records that the link at pos holds its code in its namespace,
// or says which row already does.
func (p *parser) claimCode(pos Position, code field, link *Link) string {
	if link.Code == "" {
		return ""
	}
	key := link.Namespace + "/" + link.Code
	if first, dup := p.codeFirst[key]; dup {
		hint := ""
		if link.Domain != "" && len(p.domains) == 0 {
			hint = " (links of different short domains go to different namespaces with --domain HOST=NAMESPACE)"
		}
		return fmt.Sprintf("duplicate %s %q: %s already has it; a code is unique in a namespace%s", code.name, link.Code, first, hint)
	}
	p.codeFirst[key] = pos
	return ""
}

func fieldName(f field, fallback string) string {
	if f.name != "" {
		return f.name
	}
	return fallback
}

// splitShortURL returns the host (lower-case, with its port) and the code
// of a short URL: its path without the leading and trailing slash (the
// YOURLS plugin writes /keyword/). A bare code is accepted as the path.
func splitShortURL(raw string) (host, path string, err error) {
	if !strings.Contains(raw, "://") {
		// Bitly's id and some exports write "bit.ly/abc".
		if strings.HasPrefix(raw, "/") || !strings.Contains(raw, "/") {
			return "", strings.Trim(raw, "/"), nil
		}
		raw = "https://" + raw
	}
	u, err := url.Parse(raw)
	if err != nil {
		return "", "", fmt.Errorf("not a URL")
	}
	return strings.ToLower(u.Host), strings.Trim(u.Path, "/"), nil
}

func (p *parser) parseTime(f field) (time.Time, error) {
	for _, layout := range p.timeLayouts {
		if at, err := time.Parse(layout, f.value); err == nil {
			return at, nil
		}
	}
	return time.Time{}, fmt.Errorf("invalid %s %q: want an RFC 3339 time such as 2026-12-31T23:59:59Z", f.name, f.value)
}

// sortedKeys is for messages that list a map.
func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
