package importer

import (
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"unicode/utf8"
)

// This file reads the yourls_url table out of a MySQL dump as mysqldump,
// phpMyAdmin and Navicat write them: comments (-- , #, /* */ and the
// /*!40101 ... */ version comments), SET, DROP, CREATE TABLE, LOCK TABLES,
// and INSERT (or REPLACE) INTO `prefix_url` [(columns)] VALUES (...),(...);
// with backslash-escaped and doubled quotes, 0x and X'' hex literals and
// _charset introducers. Everything but the YOURLS table is skipped.
//
// The dump is read as it streams: the lexer holds a buffer of sqlBuffer
// bytes and the token being read, and the INSERTs of the other tables
// (yourls_log holds a row per click, millions where the URL table holds
// thousands) are scanned without keeping a value. Memory is the links',
// not the dump's.

// sqlBuffer is the lexer's read buffer.
const sqlBuffer = 64 << 10

// sqlTokenKind is the kind of a token of a MySQL dump.
type sqlTokenKind int

const (
	sqlEOF    sqlTokenKind = iota
	sqlWord                // keyword, unquoted name, NULL, TRUE
	sqlIdent               // `quoted name`
	sqlString              // '...' or "...", unescaped
	sqlNumber              // 12, 1.5, 1e3 (the sign is a separate token)
	sqlHex                 // 0x41 or X'41', decoded
	sqlPunct               // one byte: ( ) , ; . = and the rest
)

type sqlToken struct {
	kind sqlTokenKind
	text string // the value: unescaped for strings, decoded for hex; "" while discarding, but for punctuation
	line int
}

// sqlLexer splits a dump into tokens as it reads it. It never panics on
// any input: the fuzz test holds it to that.
type sqlLexer struct {
	r        io.Reader
	buf      []byte
	pos, end int   // buf[pos:end] is read and not yet lexed
	offset   int64 // bytes lexed, for the fuzz test's progress check
	eof      bool
	err      error // a read error other than io.EOF
	line     int
	// discard lexes without keeping the tokens' text (but punctuation's):
	// the statements of tables that are not read.
	discard bool
	text    []byte // the text of the token being lexed
}

func newSQLLexer(r io.Reader) *sqlLexer {
	return &sqlLexer{r: r, buf: make([]byte, sqlBuffer), line: 1}
}

// sqlSyntaxError stops the reading: after an unterminated string the lexer
// cannot tell where the next statement starts.
type sqlSyntaxError struct {
	line int
	msg  string
}

func (e *sqlSyntaxError) Error() string { return e.msg }

// fill makes n bytes available from pos, unless the input ends first; it
// reports whether they are.
func (l *sqlLexer) fill(n int) bool {
	if l.end-l.pos >= n {
		return true
	}
	if l.eof {
		return false
	}
	copy(l.buf, l.buf[l.pos:l.end])
	l.end -= l.pos
	l.pos = 0
	for stalled := 0; l.end < n && !l.eof; {
		k, err := l.r.Read(l.buf[l.end:])
		l.end += k
		switch {
		case errors.Is(err, io.EOF):
			l.eof = true
		case err != nil:
			l.err, l.eof = err, true
		case k == 0:
			// io.Reader allows a read of nothing; not forever.
			if stalled++; stalled >= 100 {
				l.err, l.eof = io.ErrNoProgress, true
			}
		}
	}
	return l.end-l.pos >= n
}

// more reports whether a byte is left.
func (l *sqlLexer) more() bool { return l.pos < l.end || l.fill(1) }

// cur is the next byte; more must have said there is one.
func (l *sqlLexer) cur() byte { return l.buf[l.pos] }

func (l *sqlLexer) peekByte(offset int) byte {
	if l.pos+offset < l.end || l.fill(offset+1) {
		return l.buf[l.pos+offset]
	}
	return 0
}

// advance consumes the next byte; more must have said there is one.
func (l *sqlLexer) advance() byte {
	c := l.buf[l.pos]
	l.pos++
	l.offset++
	if c == '\n' {
		l.line++
	}
	return c
}

// keep adds c to the token's text, unless discarding.
func (l *sqlLexer) keep(c byte) {
	if !l.discard {
		l.text = append(l.text, c)
	}
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$' || c >= 0x80
}

func isHexDigit(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// punctText is the text of each one-byte token, so that punctuation costs
// no allocation.
var punctText = func() (t [256]string) {
	for i := range t {
		t[i] = string(rune(i))
		if i >= 0x80 {
			t[i] = string([]byte{byte(i)})
		}
	}
	return t
}()

// next returns the next token, skipping blanks and comments.
func (l *sqlLexer) next() (sqlToken, error) {
	for l.more() {
		c := l.cur()
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v':
			l.advance()
		case c == '#' || c == '-' && l.peekByte(1) == '-' && (!l.fill(3) || strings.IndexByte(" \t\r\n", l.peekByte(2)) >= 0):
			// MySQL wants a blank after "--"; mysqldump writes "-- ".
			for l.more() && l.cur() != '\n' {
				l.advance()
			}
		case c == '/' && l.peekByte(1) == '*':
			// /*!40101 SET ... */ version comments hold session settings,
			// never rows: skipped like plain comments.
			start := l.line
			l.advance()
			l.advance()
			for {
				if !l.more() {
					return sqlToken{}, &sqlSyntaxError{line: start, msg: "a /* comment is not closed with */"}
				}
				if l.cur() == '*' && l.peekByte(1) == '/' {
					l.advance()
					l.advance()
					break
				}
				l.advance()
			}
		default:
			return l.token()
		}
	}
	return sqlToken{kind: sqlEOF, line: l.line}, nil
}

// textString is the token's text as a string; "" while discarding.
func (l *sqlLexer) textString() string {
	if l.discard {
		return ""
	}
	return string(l.text)
}

func (l *sqlLexer) token() (sqlToken, error) {
	line := l.line
	c := l.cur()
	l.text = l.text[:0]
	switch {
	case c == '\'' || c == '"':
		err := l.quoted(c)
		return sqlToken{kind: sqlString, text: l.textString(), line: line}, err
	case c == '`':
		err := l.quoted(c)
		return sqlToken{kind: sqlIdent, text: l.textString(), line: line}, err
	case (c == 'x' || c == 'X') && l.peekByte(1) == '\'':
		l.advance()
		if err := l.quoted('\''); err != nil {
			return sqlToken{}, err
		}
		if l.discard {
			return sqlToken{kind: sqlHex, line: line}, nil
		}
		decoded, decodeErr := hex.DecodeString(string(l.text))
		if decodeErr != nil {
			return sqlToken{}, &sqlSyntaxError{line: line, msg: fmt.Sprintf("invalid hex literal X'%s'", l.text)}
		}
		return sqlToken{kind: sqlHex, text: string(decoded), line: line}, nil
	case (c == 'n' || c == 'N') && l.peekByte(1) == '\'':
		// N'...': a national character set string.
		l.advance()
		err := l.quoted('\'')
		return sqlToken{kind: sqlString, text: l.textString(), line: line}, err
	case c == '0' && (l.peekByte(1) == 'x' || l.peekByte(1) == 'X') && isHexDigit(l.peekByte(2)):
		l.advance()
		l.advance()
		for l.more() && isHexDigit(l.cur()) {
			l.keep(l.advance())
		}
		if l.discard {
			return sqlToken{kind: sqlHex, line: line}, nil
		}
		digits := string(l.text)
		if len(digits)%2 == 1 {
			digits = "0" + digits // MySQL pads 0xABC on the left
		}
		decoded, _ := hex.DecodeString(digits)
		return sqlToken{kind: sqlHex, text: string(decoded), line: line}, nil
	case c >= '0' && c <= '9' || c == '.' && l.peekByte(1) >= '0' && l.peekByte(1) <= '9':
		return l.number(line), nil
	case isWordByte(c):
		for l.more() && isWordByte(l.cur()) {
			l.keep(l.advance())
		}
		return sqlToken{kind: sqlWord, text: l.textString(), line: line}, nil
	}
	l.advance()
	return sqlToken{kind: sqlPunct, text: punctText[c], line: line}, nil
}

// number reads a decimal number at pos: digits, a point, an exponent.
func (l *sqlLexer) number(line int) sqlToken {
	var previous byte
	first := true
	for l.more() {
		d := l.cur()
		exponentSign := (d == '+' || d == '-') && !first && (previous == 'e' || previous == 'E')
		if (d < '0' || d > '9') && d != '.' && d != 'e' && d != 'E' && !exponentSign {
			break
		}
		previous, first = d, false
		l.keep(l.advance())
	}
	return sqlToken{kind: sqlNumber, text: l.textString(), line: line}
}

// quoted reads a quoted string or name whose opening quote is at pos into
// the token's text: the quote doubled stands for itself and, in strings, a
// backslash escapes the next byte as MySQL does (\n, \t, \0, \Z...; \% and
// \_ keep theirs).
func (l *sqlLexer) quoted(quote byte) error {
	start := l.line
	l.advance()
	for {
		if !l.more() {
			what := "string"
			if quote == '`' {
				what = "quoted name"
			}
			return &sqlSyntaxError{line: start, msg: fmt.Sprintf("a %s opened with %c is not closed", what, quote)}
		}
		c := l.advance()
		switch {
		case c == quote:
			if l.more() && l.cur() == quote {
				l.advance()
				l.keep(quote)
				continue
			}
			return nil
		case c == '\\' && quote != '`' && l.more():
			e := l.advance()
			switch e {
			case '0':
				l.keep(0)
			case 'b':
				l.keep('\b')
			case 'n':
				l.keep('\n')
			case 'r':
				l.keep('\r')
			case 't':
				l.keep('\t')
			case 'Z':
				l.keep(0x1A)
			case '%', '_':
				l.keep('\\')
				l.keep(e)
			default:
				l.keep(e)
			}
		default:
			l.keep(c)
		}
	}
}

// sqlValue is one value of a row: a literal, NULL, or an expression this
// reader does not evaluate (NOW(), DEFAULT).
type sqlValue struct {
	text    string
	null    bool
	literal bool
}

// sqlRow is one parenthesized row of an INSERT.
type sqlRow struct {
	line   int
	number int // 1-based, within its INSERT: one line of mysqldump holds thousands
	// columns is the INSERT's column list; nil when it has none and the
	// table's columns apply.
	columns []string
	values  []sqlValue
}

// sqlTable is what the dump says about one table. Its rows are not kept:
// those of the tables that are read go to sqlDump.row as they are read.
type sqlTable struct {
	name    string
	columns []string // from CREATE TABLE; nil without one
	inserts int      // INSERT statements into it
	read    bool     // an INSERT of it was read (sqlDump.keep said so)
}

// yourlsColumnOrder is the yourls_url table of YOURLS
// includes/functions-install.php, for INSERTs without a column list when
// the dump has no CREATE TABLE.
var yourlsColumnOrder = []string{"keyword", "url", "title", "timestamp", "ip", "clicks"}

// sqlDump is a dump being read: its tables in the order they appear.
type sqlDump struct {
	lexer  *sqlLexer
	tok    sqlToken // the current token
	tables map[string]*sqlTable
	order  []string
	// keep says whether the rows of an INSERT into t with the column list
	// columns (nil without one) are read; the others are skipped unread.
	keep func(t *sqlTable, columns []string) bool
	// row receives each row read, broken each INSERT of a read table that
	// is broken (the rest of it is skipped).
	row    func(t *sqlTable, r sqlRow)
	broken func(t *sqlTable, e RowError)
}

func (d *sqlDump) advance() error {
	tok, err := d.lexer.next()
	if err != nil {
		return err
	}
	d.tok = tok
	return nil
}

func (d *sqlDump) isWord(words ...string) bool {
	if d.tok.kind != sqlWord {
		return false
	}
	for _, w := range words {
		if strings.EqualFold(d.tok.text, w) {
			return true
		}
	}
	return false
}

func (d *sqlDump) isPunct(p string) bool { return d.tok.kind == sqlPunct && d.tok.text == p }

func (d *sqlDump) table(name string) *sqlTable {
	key := strings.ToLower(name)
	t, ok := d.tables[key]
	if !ok {
		t = &sqlTable{name: name}
		d.tables[key] = t
		d.order = append(d.order, key)
	}
	return t
}

// parse reads every statement, handing the rows of the tables d.keep
// wants to d.row as it goes. A lexical error (an unclosed string or
// comment) ends it and is returned; what was read before stays read.
func (d *sqlDump) parse() *sqlSyntaxError {
	fail := func(err error) *sqlSyntaxError {
		if syntax, ok := err.(*sqlSyntaxError); ok {
			return syntax
		}
		return &sqlSyntaxError{line: d.tok.line, msg: err.Error()}
	}
	if err := d.advance(); err != nil {
		return fail(err)
	}
	for d.tok.kind != sqlEOF {
		var err error
		switch {
		case d.isPunct(";"):
			err = d.advance()
		case d.isWord("INSERT", "REPLACE"):
			err = d.insert()
		case d.isWord("CREATE"):
			err = d.createTable()
		default:
			err = d.skipStatement()
		}
		if err != nil {
			return fail(err)
		}
	}
	return nil
}

// skipStatement moves past the next ';' at the top level, keeping no text
// of the tokens on the way: a statement skipped can be an INSERT of
// millions of rows.
func (d *sqlDump) skipStatement() error {
	d.lexer.discard = true
	for d.tok.kind != sqlEOF && !d.isPunct(";") {
		if err := d.advance(); err != nil {
			d.lexer.discard = false
			return err
		}
	}
	d.lexer.discard = false
	if d.tok.kind == sqlEOF {
		return nil
	}
	return d.advance()
}

// name reads a table name, `db`.`table` or db.table; it returns the table part.
func (d *sqlDump) name() (string, bool, error) {
	if d.tok.kind != sqlWord && d.tok.kind != sqlIdent {
		return "", false, nil
	}
	name := d.tok.text
	if err := d.advance(); err != nil {
		return "", false, err
	}
	for d.isPunct(".") {
		if err := d.advance(); err != nil {
			return "", false, err
		}
		if d.tok.kind != sqlWord && d.tok.kind != sqlIdent {
			return "", false, nil
		}
		name = d.tok.text
		if err := d.advance(); err != nil {
			return "", false, err
		}
	}
	return name, true, nil
}

// createTable reads the column names of CREATE TABLE name (...).
func (d *sqlDump) createTable() error {
	if err := d.advance(); err != nil {
		return err
	}
	for d.isWord("TEMPORARY") {
		if err := d.advance(); err != nil {
			return err
		}
	}
	if !d.isWord("TABLE") {
		return d.skipStatement()
	}
	if err := d.advance(); err != nil {
		return err
	}
	for d.isWord("IF", "NOT", "EXISTS") {
		if err := d.advance(); err != nil {
			return err
		}
	}
	name, ok, err := d.name()
	if err != nil || !ok || !d.isPunct("(") {
		if err != nil {
			return err
		}
		return d.skipStatement()
	}
	var columns []string
	depth := 0
	atItemStart := false
	for d.tok.kind != sqlEOF && !d.isPunct(";") {
		switch {
		case d.isPunct("("):
			depth++
			atItemStart = depth == 1
			if err := d.advance(); err != nil {
				return err
			}
			continue
		case d.isPunct(")"):
			depth--
		case d.isPunct(",") && depth == 1:
			atItemStart = true
			if err := d.advance(); err != nil {
				return err
			}
			continue
		case atItemStart && (d.tok.kind == sqlIdent || d.tok.kind == sqlWord):
			if d.tok.kind == sqlIdent || !d.isWord("PRIMARY", "KEY", "UNIQUE", "INDEX", "CONSTRAINT", "FOREIGN", "FULLTEXT", "SPATIAL", "CHECK") {
				columns = append(columns, d.tok.text)
			}
		}
		atItemStart = false
		if err := d.advance(); err != nil {
			return err
		}
	}
	if len(columns) > 0 {
		d.table(name).columns = columns
	}
	return d.skipStatement()
}

// insert reads INSERT [modifiers] [INTO] name [(columns)] VALUES (...),(...).
func (d *sqlDump) insert() error {
	line := d.tok.line
	if err := d.advance(); err != nil {
		return err
	}
	for d.isWord("LOW_PRIORITY", "DELAYED", "HIGH_PRIORITY", "IGNORE", "INTO") {
		if err := d.advance(); err != nil {
			return err
		}
	}
	name, ok, err := d.name()
	if err != nil {
		return err
	}
	if !ok {
		return d.skipStatement()
	}
	t := d.table(name)
	t.inserts++
	broken := func(format string, args ...any) error {
		if d.keep(t, nil) || t.read {
			d.broken(t, RowError{
				Position: Position{Line: d.tok.line},
				Reason:   fmt.Sprintf("SQL syntax error in the INSERT of line %d: %s; the rest of this INSERT was not read", line, fmt.Sprintf(format, args...)),
			})
		}
		return d.skipStatement()
	}
	columns, bad, err := d.columnList()
	if err != nil {
		return err
	}
	if bad != "" {
		return broken("%s", bad)
	}
	if !d.keep(t, columns) {
		// Not a table of links (yourls_log, the options...): its rows are
		// scanned to find the end of the statement, and forgotten.
		return d.skipStatement()
	}
	t.read = true
	if !d.isWord("VALUES", "VALUE") {
		return broken("only INSERT ... VALUES is read, not %q", d.tok.text)
	}
	for number := 1; ; number++ {
		if err := d.advance(); err != nil {
			return err
		}
		if !d.isPunct("(") {
			return broken("want ( to start a row, not %q", d.tok.text)
		}
		r := sqlRow{line: d.tok.line, number: number, columns: columns}
		if err := d.advance(); err != nil {
			return err
		}
		for !d.isPunct(")") {
			v, ok, err := d.value()
			if err != nil {
				return err
			}
			if !ok {
				return broken("want a value, not %q", d.tok.text)
			}
			r.values = append(r.values, v)
			if d.isPunct(",") {
				if err := d.advance(); err != nil {
					return err
				}
			} else if !d.isPunct(")") {
				return broken("want , or ) after a value, not %q", d.tok.text)
			}
		}
		d.row(t, r)
		if err := d.advance(); err != nil {
			return err
		}
		if !d.isPunct(",") {
			break
		}
	}
	// ON DUPLICATE KEY UPDATE ... and the closing ';'.
	return d.skipStatement()
}

// columnList reads the column list of an INSERT, if it has one: nil
// without; bad says what is wrong with a broken one.
func (d *sqlDump) columnList() (columns []string, bad string, err error) {
	if !d.isPunct("(") {
		return nil, "", nil
	}
	for {
		if err := d.advance(); err != nil {
			return nil, "", err
		}
		if d.tok.kind != sqlIdent && d.tok.kind != sqlWord {
			return nil, fmt.Sprintf("want a column name, not %q", d.tok.text), nil
		}
		columns = append(columns, d.tok.text)
		if err := d.advance(); err != nil {
			return nil, "", err
		}
		if d.isPunct(")") {
			break
		}
		if !d.isPunct(",") {
			return nil, fmt.Sprintf("want , or ) in the column list, not %q", d.tok.text), nil
		}
	}
	return columns, "", d.advance()
}

// value reads one value of a row and moves past it.
func (d *sqlDump) value() (sqlValue, bool, error) {
	var v sqlValue
	// A charset introducer before a literal: _utf8mb4'...' or _binary 0x...
	if d.tok.kind == sqlWord && strings.HasPrefix(d.tok.text, "_") {
		if err := d.advance(); err != nil {
			return v, false, err
		}
	}
	sign := ""
	for d.isPunct("-") || d.isPunct("+") {
		if d.tok.text == "-" {
			sign = map[string]string{"": "-", "-": ""}[sign]
		}
		if err := d.advance(); err != nil {
			return v, false, err
		}
	}
	switch {
	case d.tok.kind == sqlString || d.tok.kind == sqlHex:
		v = sqlValue{text: d.tok.text, literal: true}
	case d.tok.kind == sqlNumber:
		v = sqlValue{text: sign + d.tok.text, literal: true}
	case d.isWord("NULL"):
		v = sqlValue{null: true, literal: true}
	case d.isWord("TRUE", "FALSE"):
		v = sqlValue{text: map[bool]string{true: "1", false: "0"}[d.isWord("TRUE")], literal: true}
	case d.tok.kind == sqlWord:
		// NOW(), CURRENT_TIMESTAMP, DEFAULT: not a literal; skip its
		// parenthesized arguments.
		if err := d.advance(); err != nil {
			return v, false, err
		}
		if d.isPunct("(") {
			for depth := 0; ; {
				if d.isPunct("(") {
					depth++
				} else if d.isPunct(")") {
					depth--
				}
				if depth == 0 || d.tok.kind == sqlEOF || d.isPunct(";") {
					break
				}
				if err := d.advance(); err != nil {
					return v, false, err
				}
			}
			if !d.isPunct(")") {
				return v, false, nil
			}
		} else {
			return sqlValue{}, true, d.collate()
		}
	default:
		return v, false, nil
	}
	if err := d.advance(); err != nil {
		return v, false, err
	}
	return v, true, d.collate()
}

// collate skips a COLLATE name after a literal.
func (d *sqlDump) collate() error {
	if !d.isWord("COLLATE") {
		return nil
	}
	if err := d.advance(); err != nil {
		return err
	}
	if d.tok.kind == sqlWord || d.tok.kind == sqlIdent || d.tok.kind == sqlString {
		return d.advance()
	}
	return nil
}

// holdsLinks tells the YOURLS URL table by its columns (keyword and url),
// or, when the dump says nothing of them, by its name: the table prefix is
// configurable (YOURLS_DB_PREFIX), the name always ends in "url".
func holdsLinks(name string, columns []string) bool {
	if columns == nil {
		return strings.HasSuffix(strings.ToLower(name), "url")
	}
	return columnIndex(columns, "keyword") >= 0 && columnIndex(columns, "url") >= 0
}

func columnIndex(columns []string, name string) int {
	for i, c := range columns {
		if strings.EqualFold(c, name) {
			return i
		}
	}
	return -1
}

// readSQLDump imports the rows of the YOURLS URL table of a MySQL dump as
// it streams: rows of the table are imported as they are read, the other
// tables' INSERTs are skipped without keeping their values.
func (p *parser) readSQLDump(in io.Reader) error {
	d := &sqlDump{lexer: newSQLLexer(in), tables: map[string]*sqlTable{}}
	// The tables whose rows are read: --table, else every table that looks
	// like YOURLS' (two of them are an error, below, once the dump is read).
	d.keep = func(t *sqlTable, columns []string) bool {
		if p.table != "" {
			return strings.EqualFold(t.name, p.table)
		}
		if columns == nil {
			columns = t.columns
		}
		return holdsLinks(t.name, columns)
	}
	guessed := map[*sqlTable]bool{}
	d.row = func(t *sqlTable, r sqlRow) { p.addSQLRow(t, r, guessed) }
	d.broken = func(_ *sqlTable, e RowError) { p.skip(e.Position, "%s", e.Reason) }
	syntaxErr := d.parse()
	if err := d.lexer.err; err != nil {
		return fmt.Errorf("reading the dump: %v", err)
	}

	var candidates, withRows []string
	for _, key := range d.order {
		t := d.tables[key]
		if t.inserts > 0 {
			withRows = append(withRows, t.name)
		}
		if t.read || t.inserts == 0 && t.columns != nil && holdsLinks(t.name, t.columns) {
			candidates = append(candidates, t.name)
		}
	}
	var table *sqlTable
	switch {
	case p.table != "":
		table = d.tables[strings.ToLower(p.table)]
		if table == nil {
			return fmt.Errorf("the dump has no table %q; it has INSERTs into %q", p.table, withRows)
		}
	case len(candidates) == 1:
		table = d.tables[strings.ToLower(candidates[0])]
	case len(candidates) > 1:
		return fmt.Errorf("the dump holds %d YOURLS URL tables %q (one per table prefix): pass --table with the one to import", len(candidates), candidates)
	case syntaxErr != nil:
		return fmt.Errorf("SQL syntax error at line %d: %s; no row of a YOURLS URL table was read before it", syntaxErr.line, syntaxErr.msg)
	default:
		return fmt.Errorf("the dump has no INSERT into a YOURLS URL table (columns keyword and url, named <prefix>url such as yourls_url); it has INSERTs into %q: pass --table NAME if one of them is it", withRows)
	}
	other := len(withRows)
	if table.inserts > 0 {
		other--
	}
	if other > 0 {
		p.note("read table %s; the rows of %d other table(s) of the dump were ignored", table.name, other)
	}
	if syntaxErr != nil {
		p.skip(Position{Line: syntaxErr.line}, "SQL syntax error: %s; the rest of the dump was not read", syntaxErr.msg)
	}
	sort.SliceStable(p.result.Skipped, func(i, j int) bool {
		return p.result.Skipped[i].Position.Line < p.result.Skipped[j].Position.Line
	})
	return nil
}

// addSQLRow imports one row of table t.
func (p *parser) addSQLRow(t *sqlTable, r sqlRow, guessed map[*sqlTable]bool) {
	columns := r.columns
	if columns == nil {
		columns = t.columns
	}
	if columns == nil {
		columns = yourlsColumnOrder
		if !guessed[t] {
			guessed[t] = true
			p.note("table %s: the dump has neither CREATE TABLE nor column lists, so its columns are taken in YOURLS' order (%s)", t.name, strings.Join(yourlsColumnOrder, ", "))
		}
	}
	keyword, urlColumn := columnIndex(columns, "keyword"), columnIndex(columns, "url")
	title, clicks := columnIndex(columns, "title"), columnIndex(columns, "clicks")
	pos := Position{Line: r.line, Path: fmt.Sprintf("line %d, row %d", r.line, r.number)}
	if keyword < 0 || urlColumn < 0 {
		p.skip(pos, "the INSERT's columns %q lack keyword or url", columns)
		return
	}
	if len(r.values) != len(columns) {
		p.skip(pos, "the row has %d value(s) but table %s has %d column(s) %q", len(r.values), t.name, len(columns), columns)
		return
	}
	cell := func(i int, name string) (field, bool) {
		if i < 0 {
			return field{}, true
		}
		v := r.values[i]
		if !v.literal {
			return field{}, false
		}
		return newField(name, v.text), true
	}
	code, ok1 := cell(keyword, "keyword")
	target, ok2 := cell(urlColumn, "url")
	titleField, _ := cell(title, "title")
	visits, _ := cell(clicks, "clicks")
	if !ok1 || !ok2 {
		p.skip(pos, "keyword or url is an SQL expression, not a value")
		return
	}
	if !utf8.ValidString(code.value) || !utf8.ValidString(target.value) {
		p.skip(pos, "keyword or url is not UTF-8 text (a hex literal of other bytes?)")
		return
	}
	if !utf8.ValidString(titleField.value) {
		titleField = field{}
	}
	p.add(row{position: pos, code: code, url: target, title: titleField, visits: visits})
}
