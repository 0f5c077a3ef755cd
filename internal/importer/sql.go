package importer

import (
	"encoding/hex"
	"fmt"
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
	text string // the value: unescaped for strings, decoded for hex
	line int
}

// sqlLexer splits a dump into tokens. It never panics on any input: the
// fuzz test holds it to that.
type sqlLexer struct {
	data []byte
	pos  int
	line int
}

// sqlSyntaxError stops the reading: after an unterminated string the lexer
// cannot tell where the next statement starts.
type sqlSyntaxError struct {
	line int
	msg  string
}

func (e *sqlSyntaxError) Error() string { return e.msg }

func (l *sqlLexer) peekByte(offset int) byte {
	if l.pos+offset < len(l.data) {
		return l.data[l.pos+offset]
	}
	return 0
}

func (l *sqlLexer) advance() byte {
	c := l.data[l.pos]
	l.pos++
	if c == '\n' {
		l.line++
	}
	return c
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '$' || c >= 0x80
}

func isHexDigit(c byte) bool {
	return c >= '0' && c <= '9' || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// next returns the next token, skipping blanks and comments.
func (l *sqlLexer) next() (sqlToken, error) {
	for l.pos < len(l.data) {
		c := l.data[l.pos]
		switch {
		case c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == '\f' || c == '\v':
			l.advance()
		case c == '#' || c == '-' && l.peekByte(1) == '-' && (l.pos+2 >= len(l.data) || strings.IndexByte(" \t\r\n", l.peekByte(2)) >= 0):
			// MySQL wants a blank after "--"; mysqldump writes "-- ".
			for l.pos < len(l.data) && l.data[l.pos] != '\n' {
				l.advance()
			}
		case c == '/' && l.peekByte(1) == '*':
			// /*!40101 SET ... */ version comments hold session settings,
			// never rows: skipped like plain comments.
			start := l.line
			l.advance()
			l.advance()
			for {
				if l.pos >= len(l.data) {
					return sqlToken{}, &sqlSyntaxError{line: start, msg: "a /* comment is not closed with */"}
				}
				if l.data[l.pos] == '*' && l.peekByte(1) == '/' {
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

func (l *sqlLexer) token() (sqlToken, error) {
	line := l.line
	c := l.data[l.pos]
	switch {
	case c == '\'' || c == '"':
		s, err := l.quoted(c)
		return sqlToken{kind: sqlString, text: s, line: line}, err
	case c == '`':
		s, err := l.quoted(c)
		return sqlToken{kind: sqlIdent, text: s, line: line}, err
	case (c == 'x' || c == 'X') && l.peekByte(1) == '\'':
		l.advance()
		digits, err := l.quoted('\'')
		if err != nil {
			return sqlToken{}, err
		}
		decoded, decodeErr := hex.DecodeString(digits)
		if decodeErr != nil {
			return sqlToken{}, &sqlSyntaxError{line: line, msg: fmt.Sprintf("invalid hex literal X'%s'", digits)}
		}
		return sqlToken{kind: sqlHex, text: string(decoded), line: line}, nil
	case (c == 'n' || c == 'N') && l.peekByte(1) == '\'':
		// N'...': a national character set string.
		l.advance()
		s, err := l.quoted('\'')
		return sqlToken{kind: sqlString, text: s, line: line}, err
	case c == '0' && (l.peekByte(1) == 'x' || l.peekByte(1) == 'X') && isHexDigit(l.peekByte(2)):
		l.advance()
		l.advance()
		start := l.pos
		for l.pos < len(l.data) && isHexDigit(l.data[l.pos]) {
			l.advance()
		}
		digits := string(l.data[start:l.pos])
		if len(digits)%2 == 1 {
			digits = "0" + digits // MySQL pads 0xABC on the left
		}
		decoded, _ := hex.DecodeString(digits)
		return sqlToken{kind: sqlHex, text: string(decoded), line: line}, nil
	case c >= '0' && c <= '9' || c == '.' && l.peekByte(1) >= '0' && l.peekByte(1) <= '9':
		return l.number(line), nil
	case isWordByte(c):
		start := l.pos
		for l.pos < len(l.data) && isWordByte(l.data[l.pos]) {
			l.advance()
		}
		return sqlToken{kind: sqlWord, text: string(l.data[start:l.pos]), line: line}, nil
	}
	l.advance()
	return sqlToken{kind: sqlPunct, text: string(c), line: line}, nil
}

// number reads a decimal number at l.pos: digits, a point, an exponent.
func (l *sqlLexer) number(line int) sqlToken {
	start := l.pos
	for l.pos < len(l.data) {
		d := l.data[l.pos]
		exponentSign := (d == '+' || d == '-') && l.pos > start && (l.data[l.pos-1] == 'e' || l.data[l.pos-1] == 'E')
		if (d < '0' || d > '9') && d != '.' && d != 'e' && d != 'E' && !exponentSign {
			break
		}
		l.advance()
	}
	return sqlToken{kind: sqlNumber, text: string(l.data[start:l.pos]), line: line}
}

// quoted reads a quoted string or name whose opening quote is at l.pos:
// the quote doubled stands for itself and, in strings, a backslash escapes
// the next byte as MySQL does (\n, \t, \0, \Z...; \% and \_ keep theirs).
func (l *sqlLexer) quoted(quote byte) (string, error) {
	start := l.line
	l.advance()
	var b strings.Builder
	for {
		if l.pos >= len(l.data) {
			what := "string"
			if quote == '`' {
				what = "quoted name"
			}
			return "", &sqlSyntaxError{line: start, msg: fmt.Sprintf("a %s opened with %c is not closed", what, quote)}
		}
		c := l.advance()
		switch {
		case c == quote:
			if l.pos < len(l.data) && l.data[l.pos] == quote {
				l.advance()
				b.WriteByte(quote)
				continue
			}
			return b.String(), nil
		case c == '\\' && quote != '`' && l.pos < len(l.data):
			e := l.advance()
			switch e {
			case '0':
				b.WriteByte(0)
			case 'b':
				b.WriteByte('\b')
			case 'n':
				b.WriteByte('\n')
			case 'r':
				b.WriteByte('\r')
			case 't':
				b.WriteByte('\t')
			case 'Z':
				b.WriteByte(0x1A)
			case '%', '_':
				b.WriteByte('\\')
				b.WriteByte(e)
			default:
				b.WriteByte(e)
			}
		default:
			b.WriteByte(c)
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

// sqlTable is what the dump says about one table.
type sqlTable struct {
	name    string
	columns []string // from CREATE TABLE; nil without one
	rows    []sqlRow
	errors  []RowError // broken INSERT statements, reported if the table is read
}

// yourlsColumnOrder is the yourls_url table of YOURLS
// includes/functions-install.php, for INSERTs without a column list when
// the dump has no CREATE TABLE.
var yourlsColumnOrder = []string{"keyword", "url", "title", "timestamp", "ip", "clicks"}

// sqlDump is a dump being read: its tables in the order they appear.
type sqlDump struct {
	lexer  sqlLexer
	tok    sqlToken // the current token
	tables map[string]*sqlTable
	order  []string
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

// parseSQLDump reads every statement. A lexical error (an unclosed string
// or comment) ends it; it is returned with what was read before.
func parseSQLDump(data []byte) (*sqlDump, *sqlSyntaxError) {
	d := &sqlDump{lexer: sqlLexer{data: data, line: 1}, tables: map[string]*sqlTable{}}
	fail := func(err error) *sqlSyntaxError {
		if syntax, ok := err.(*sqlSyntaxError); ok {
			return syntax
		}
		return &sqlSyntaxError{line: d.tok.line, msg: err.Error()}
	}
	if err := d.advance(); err != nil {
		return d, fail(err)
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
			return d, fail(err)
		}
	}
	return d, nil
}

// skipStatement moves past the next ';' at the top level.
func (d *sqlDump) skipStatement() error {
	for d.tok.kind != sqlEOF && !d.isPunct(";") {
		if err := d.advance(); err != nil {
			return err
		}
	}
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
	broken := func(format string, args ...any) error {
		t.errors = append(t.errors, RowError{
			Position: Position{Line: d.tok.line},
			Reason:   fmt.Sprintf("SQL syntax error in the INSERT of line %d: %s; the rest of this INSERT was not read", line, fmt.Sprintf(format, args...)),
		})
		return d.skipStatement()
	}
	var columns []string
	if d.isPunct("(") {
		for {
			if err := d.advance(); err != nil {
				return err
			}
			if d.tok.kind != sqlIdent && d.tok.kind != sqlWord {
				return broken("want a column name, not %q", d.tok.text)
			}
			columns = append(columns, d.tok.text)
			if err := d.advance(); err != nil {
				return err
			}
			if d.isPunct(")") {
				break
			}
			if !d.isPunct(",") {
				return broken("want , or ) in the column list, not %q", d.tok.text)
			}
		}
		if err := d.advance(); err != nil {
			return err
		}
	}
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
		t.rows = append(t.rows, r)
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

// isYOURLSTable tells the YOURLS URL table by its columns (keyword and url),
// or, when the dump says nothing of them, by its name: the table prefix is
// configurable (YOURLS_DB_PREFIX), the name always ends in "url".
func (t *sqlTable) isYOURLSTable() bool {
	columns := t.columns
	for _, r := range t.rows {
		if columns == nil {
			columns = r.columns
		}
	}
	if columns == nil {
		return strings.HasSuffix(strings.ToLower(t.name), "url") && len(t.rows) > 0
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

// readSQLDump imports the rows of the YOURLS URL table of a MySQL dump.
func (p *parser) readSQLDump(data []byte) error {
	dump, syntaxErr := parseSQLDump(data)
	var candidates, withRows []string
	for _, key := range dump.order {
		t := dump.tables[key]
		if len(t.rows) > 0 || len(t.errors) > 0 {
			withRows = append(withRows, t.name)
		}
		if t.isYOURLSTable() {
			candidates = append(candidates, t.name)
		}
	}
	var table *sqlTable
	switch {
	case p.table != "":
		table = dump.tables[strings.ToLower(p.table)]
		if table == nil {
			return fmt.Errorf("the dump has no table %q; it has INSERTs into %q", p.table, withRows)
		}
	case len(candidates) == 1:
		table = dump.tables[strings.ToLower(candidates[0])]
	case len(candidates) > 1:
		return fmt.Errorf("the dump holds %d YOURLS URL tables %q (one per table prefix): pass --table with the one to import", len(candidates), candidates)
	case syntaxErr != nil:
		return fmt.Errorf("SQL syntax error at line %d: %s; no row of a YOURLS URL table was read before it", syntaxErr.line, syntaxErr.msg)
	default:
		return fmt.Errorf("the dump has no INSERT into a YOURLS URL table (columns keyword and url, named <prefix>url such as yourls_url); it has INSERTs into %q: pass --table NAME if one of them is it", withRows)
	}
	if other := len(withRows) - 1; other > 0 {
		p.note("read table %s; the rows of %d other table(s) of the dump were ignored", table.name, other)
	}

	guessed := false
	for _, r := range table.rows {
		columns := r.columns
		if columns == nil {
			columns = table.columns
		}
		if columns == nil {
			columns = yourlsColumnOrder
			if !guessed {
				guessed = true
				p.note("table %s: the dump has neither CREATE TABLE nor column lists, so its columns are taken in YOURLS' order (%s)", table.name, strings.Join(yourlsColumnOrder, ", "))
			}
		}
		keyword, urlColumn := columnIndex(columns, "keyword"), columnIndex(columns, "url")
		title, clicks := columnIndex(columns, "title"), columnIndex(columns, "clicks")
		pos := Position{Line: r.line, Path: fmt.Sprintf("line %d, row %d", r.line, r.number)}
		if keyword < 0 || urlColumn < 0 {
			p.skip(pos, "the INSERT's columns %q lack keyword or url", columns)
			continue
		}
		if len(r.values) != len(columns) {
			p.skip(pos, "the row has %d value(s) but table %s has %d column(s) %q", len(r.values), table.name, len(columns), columns)
			continue
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
			continue
		}
		if !utf8.ValidString(code.value) || !utf8.ValidString(target.value) {
			p.skip(pos, "keyword or url is not UTF-8 text (a hex literal of other bytes?)")
			continue
		}
		if !utf8.ValidString(titleField.value) {
			titleField = field{}
		}
		p.add(row{position: pos, code: code, url: target, title: titleField, visits: visits})
	}
	p.result.Skipped = append(p.result.Skipped, table.errors...)
	if syntaxErr != nil {
		p.skip(Position{Line: syntaxErr.line}, "SQL syntax error: %s; the rest of the dump was not read", syntaxErr.msg)
	}
	sort.SliceStable(p.result.Skipped, func(i, j int) bool {
		return p.result.Skipped[i].Position.Line < p.result.Skipped[j].Position.Line
	})
	return nil
}
