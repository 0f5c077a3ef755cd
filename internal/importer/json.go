package importer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"
	"time"
)

// jsonField turns one JSON value into a field: strings as they are, numbers
// and booleans in their JSON spelling (exporters differ in whether clicks or
// maxVisits are quoted: YOURLS reads them from MySQL as strings), null or
// absent as unset. Objects and arrays are not values a ShortLink field can
// take.
func jsonField(name string, raw json.RawMessage) (field, error) {
	raw = bytes.TrimSpace(raw)
	if isNull(raw) {
		return field{name: name}, nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return field{}, fmt.Errorf("%s: %v", name, err)
		}
		return newField(name, s), nil
	case '{', '[':
		return field{}, fmt.Errorf("%s is a JSON %s; want a string or a number", name, map[byte]string{'{': "object", '[': "array"}[raw[0]])
	}
	return newField(name, string(raw)), nil
}

// object is one JSON object of an export, read member by member so that a
// member of the wrong type is reported for its row, with its name.
type object struct {
	members map[string]json.RawMessage
	prefix  string // for names in messages: "meta." for Shlink's meta
	err     error  // the first member of the wrong type
}

// decodeObject reads element as a JSON object; ok is false when it is not one.
func decodeObject(element json.RawMessage) (*object, bool) {
	if trimmed := bytes.TrimSpace(element); len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, false
	}
	var members map[string]json.RawMessage
	if err := json.Unmarshal(element, &members); err != nil {
		return nil, false
	}
	return &object{members: members}, true
}

func (o *object) has(name string) bool {
	_, ok := o.members[name]
	return ok
}

// str reads a string or number member.
func (o *object) str(name string) field {
	f, err := jsonField(o.prefix+name, o.members[name])
	if err != nil && o.err == nil {
		o.err = err
	}
	return f
}

// child reads a nested object; a missing or null one reads as empty.
func (o *object) child(name string) *object {
	raw := bytes.TrimSpace(o.members[name])
	child := &object{members: map[string]json.RawMessage{}, prefix: o.prefix + name + "."}
	if isNull(raw) {
		return child
	}
	if err := json.Unmarshal(raw, &child.members); err != nil && o.err == nil {
		o.err = fmt.Errorf("%s%s is not a JSON object", o.prefix, name)
	}
	child.err = o.err
	return child
}

// boolean reads a true/false member; set is false when it is absent or null.
func (o *object) boolean(name string) (value, set bool) {
	raw := bytes.TrimSpace(o.members[name])
	if isNull(raw) {
		return false, false
	}
	if err := json.Unmarshal(raw, &value); err != nil {
		if o.err == nil {
			o.err = fmt.Errorf("%s%s is %s; want true or false", o.prefix, name, raw)
		}
		return false, false
	}
	return value, true
}

// strings reads an array of strings (tags, custom bitlinks).
func (o *object) strings(name string) []string {
	raw := bytes.TrimSpace(o.members[name])
	if isNull(raw) {
		return nil
	}
	var list []string
	if err := json.Unmarshal(raw, &list); err != nil && o.err == nil {
		o.err = fmt.Errorf("%s%s is not an array of strings", o.prefix, name)
	}
	return list
}

func indexPath(prefix string, i int) Position {
	return Position{Path: prefix + "[" + strconv.Itoa(i) + "]"}
}

// jsonIn reads one JSON document as it streams: the members of its objects
// one at a time, the elements of its array of links one at a time, so that
// it holds a link, not the file. Members that are not read are skipped
// token by token.
type jsonIn struct {
	dec  *json.Decoder
	what string // what the document should be, for errors: "a Shlink API body"
}

func newJSONIn(in io.Reader, what string) *jsonIn {
	return &jsonIn{dec: json.NewDecoder(in), what: what}
}

// fail is an error of the document: it cannot be read on.
func (j *jsonIn) fail(err error) error {
	return fmt.Errorf("not %s: %v", j.what, err)
}

// open reads the start of the document: '{' or '['.
func (j *jsonIn) open() (json.Delim, error) {
	tok, err := j.dec.Token()
	if err != nil {
		return 0, j.fail(err)
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return 0, j.fail(fmt.Errorf("it is %s, not a JSON object or array", describeToken(tok)))
	}
	return d, nil
}

// end checks that nothing follows the document.
func (j *jsonIn) end() error {
	if _, err := j.dec.Token(); !errors.Is(err, io.EOF) {
		if err == nil {
			err = errors.New("more data after the end of the JSON document")
		}
		return j.fail(err)
	}
	return nil
}

// members calls member with the name of each member of the object whose
// '{' was read; member reads or skips the value. It reads the closing '}'.
func (j *jsonIn) members(member func(name string) error) error {
	for j.dec.More() {
		tok, err := j.dec.Token()
		if err != nil {
			return j.fail(err)
		}
		name, _ := tok.(string)
		if err := member(name); err != nil {
			return err
		}
	}
	if _, err := j.dec.Token(); err != nil {
		return j.fail(err)
	}
	return nil
}

// object reads the '{' of an object member; ok is false for null.
func (j *jsonIn) object(name string) (ok bool, err error) {
	tok, err := j.dec.Token()
	if err != nil {
		return false, j.fail(err)
	}
	if tok == nil {
		return false, nil
	}
	if tok != json.Delim('{') {
		return false, j.fail(fmt.Errorf("%s is %s, not a JSON object", name, describeToken(tok)))
	}
	return true, nil
}

// raw reads a value as it is: for the small members (pagination, stats).
func (j *jsonIn) raw() (json.RawMessage, error) {
	var raw json.RawMessage
	if err := j.dec.Decode(&raw); err != nil {
		return nil, j.fail(err)
	}
	return raw, nil
}

// skip reads past a value without keeping it.
func (j *jsonIn) skip() error {
	for depth := 0; ; {
		tok, err := j.dec.Token()
		if err != nil {
			return j.fail(err)
		}
		switch tok {
		case json.Delim('{'), json.Delim('['):
			depth++
		case json.Delim('}'), json.Delim(']'):
			depth--
		}
		if depth == 0 {
			return nil
		}
	}
}

func describeToken(tok json.Token) string {
	switch tok.(type) {
	case json.Delim:
		if tok == json.Delim('{') {
			return "an object"
		}
		return "an array"
	case string:
		return "a string"
	case bool:
		return "a boolean"
	case nil:
		return "null"
	}
	return "a number"
}

// elements reads the array of links at prefix (opened: its '[' is read
// already; null reads as empty) one element at a time, hands each that is
// an object to read and reports the others. It returns how many there were.
func (p *parser) elements(j *jsonIn, opened bool, prefix, want string, read func(pos Position, o *object)) (int, error) {
	if !opened {
		tok, err := j.dec.Token()
		if err != nil {
			return 0, j.fail(err)
		}
		if tok == nil {
			return 0, nil
		}
		if tok != json.Delim('[') {
			return 0, fmt.Errorf("%s is not a JSON array: it is %s", strings.TrimPrefix(prefix+" (the links)", " "), describeToken(tok))
		}
	}
	n := 0
	for ; j.dec.More(); n++ {
		var element json.RawMessage
		if err := j.dec.Decode(&element); err != nil {
			return n, j.fail(err)
		}
		pos := indexPath(prefix, n)
		o, ok := decodeObject(element)
		if !ok {
			p.skip(pos, "not a %s: want a JSON object with %s", p.result.Format.displayName()+" link", want)
			continue
		}
		read(pos, o)
	}
	if _, err := j.dec.Token(); err != nil {
		return n, j.fail(err)
	}
	return n, nil
}

// addObject adds r unless reading o met a member of the wrong type.
func (p *parser) addObject(o *object, r row) {
	if o.err != nil {
		p.skip(r.position, "%v", o.err)
		return
	}
	p.add(r)
}

// readYOURLSRows reads a JSON array of yourls_url rows
// ([{"keyword":"abc","url":"https://...","title":...,"timestamp":...,"ip":...,"clicks":...}]),
// as database tools export a table.
func (p *parser) readYOURLSRows(in io.Reader) error {
	j := newJSONIn(in, "a JSON array of YOURLS rows")
	if _, err := p.elements(j, false, "", "keyword and url", func(pos Position, o *object) {
		p.addObject(o, row{position: pos, code: o.str("keyword"), url: o.str("url"), title: o.str("title"), visits: o.str("clicks")})
	}); err != nil {
		return err
	}
	return j.end()
}

// readYOURLSAPI reads YOURLS' yourls-api.php answers in JSON: the stats
// action ({"links":{"link_1":{"shorturl":...,"url":...}},"stats":{...}},
// includes/functions.php yourls_get_stats) and the shlink-list action of
// acelaya/yourls-shlink-import-plugin ({"result":[{keyword,url,...}]}).
func (p *parser) readYOURLSAPI(in io.Reader) error {
	j := newJSONIn(in, "a YOURLS API answer")
	if d, err := j.open(); err != nil || d != '{' {
		if err == nil {
			err = j.fail(errors.New("it is an array, not a JSON object"))
		}
		return err
	}
	var links, stats json.RawMessage
	sawResult := false
	err := j.members(func(name string) error {
		var err error
		switch name {
		case "result":
			sawResult = true
			_, err = p.elements(j, false, "result", "keyword and url", func(pos Position, o *object) {
				p.addObject(o, row{position: pos, code: o.str("keyword"), url: o.str("url"), title: o.str("title"), visits: o.str("clicks")})
			})
		case "links":
			// An object of link_1, link_2...: held, to be read in order.
			links, err = j.raw()
		case "stats":
			stats, err = j.raw()
		default:
			err = j.skip()
		}
		return err
	})
	if err == nil {
		err = j.end()
	}
	if err != nil || sawResult {
		return err
	}
	if links == nil {
		if stats != nil {
			p.note("the answer has no links: ask the stats action with a limit, e.g. action=stats&filter=top&limit=<total_links>")
			return nil
		}
		return fmt.Errorf(`not a YOURLS API answer: no "links" (action=stats) or "result" (action=shlink-list)`)
	}
	var byName map[string]json.RawMessage
	if err := json.Unmarshal(links, &byName); err != nil {
		return fmt.Errorf(`not a YOURLS stats answer: "links" is not a JSON object of link_1, link_2...: %v`, err)
	}
	// PHP writes link_1, link_2... in order; a map loses that order.
	names := sortedKeys(byName)
	number := func(name string) int {
		n, err := strconv.Atoi(strings.TrimPrefix(name, "link_"))
		if err != nil {
			return -1
		}
		return n
	}
	sort.SliceStable(names, func(i, j int) bool { return number(names[i]) < number(names[j]) })
	for _, name := range names {
		pos := Position{Path: "links." + name}
		o, ok := decodeObject(byName[name])
		if !ok {
			p.skip(pos, "not a YOURLS link: want a JSON object with shorturl and url")
			continue
		}
		p.addObject(o, row{position: pos, shortURL: o.str("shorturl"), url: o.str("url"), title: o.str("title"), visits: o.str("clicks")})
	}
	var counts struct {
		TotalLinks json.Number `json:"total_links"`
	}
	if stats != nil && json.Unmarshal(stats, &counts) == nil {
		if total, err := strconv.Atoi(counts.TotalLinks.String()); err == nil && total > len(byName) {
			p.note("the answer holds %d of the %d links: the stats action returns at most its limit; ask again with limit=%d", len(byName), total, total)
		}
	}
	return nil
}

// readShlinkJSON reads the body of Shlink's GET /rest/v3/short-urls
// ({"shortUrls":{"data":[...],"pagination":{...}}}, shlink
// module/Rest/test-api/Action/ListShortUrlsTest.php) or a bare array of its
// short URLs (pages concatenated by the user).
func (p *parser) readShlinkJSON(in io.Reader) error {
	read := func(pos Position, o *object) {
		meta := o.child("meta")
		r := row{
			position:   pos,
			code:       o.str("shortCode"),
			url:        o.str("longUrl"),
			shortURL:   o.str("shortUrl"),
			domain:     o.str("domain"),
			title:      o.str("title"),
			tags:       o.strings("tags"),
			validSince: meta.str("validSince"),
			expires:    meta.str("validUntil"),
			maxUses:    meta.str("maxVisits"),
			visits:     o.str("visitsCount"), // before API v3
		}
		if o.has("visitsSummary") {
			r.visits = o.child("visitsSummary").str("total")
		}
		if forward, set := o.boolean("forwardQuery"); set {
			r.forwardQuery = newField("forwardQuery", strconv.FormatBool(forward))
		}
		if meta.err != nil && o.err == nil {
			o.err = meta.err
		}
		p.addObject(o, r)
	}
	j := newJSONIn(in, "a Shlink API body")
	d, err := j.open()
	if err != nil {
		return err
	}
	if d == '[' {
		if _, err := p.elements(j, true, "", "shortCode and longUrl", read); err != nil {
			return err
		}
		return j.end()
	}
	sawData := false
	var pagination json.RawMessage
	err = j.members(func(name string) error {
		if name != "shortUrls" {
			return j.skip()
		}
		if ok, err := j.object("shortUrls"); !ok || err != nil {
			return err
		}
		return j.members(func(name string) error {
			var err error
			switch name {
			case "data":
				sawData = true
				_, err = p.elements(j, false, "shortUrls.data", "shortCode and longUrl", read)
			case "pagination":
				pagination, err = j.raw()
			default:
				err = j.skip()
			}
			return err
		})
	})
	if err == nil {
		err = j.end()
	}
	if err != nil {
		return err
	}
	if !sawData {
		return fmt.Errorf(`not a Shlink API body: no shortUrls.data; expected the response of GET /rest/v3/short-urls, {"shortUrls":{"data":[...]}}`)
	}
	var pg struct {
		CurrentPage int `json:"currentPage"`
		PagesCount  int `json:"pagesCount"`
	}
	if pagination != nil {
		if err := json.Unmarshal(pagination, &pg); err != nil {
			return j.fail(fmt.Errorf("shortUrls.pagination: %v", err))
		}
		if pg.PagesCount > 1 {
			p.note("this is page %d of %d of the Shlink API's answer: the other pages are not in this file (ask for all with itemsPerPage=-1, or import each page)", pg.CurrentPage, pg.PagesCount)
		}
	}
	return nil
}

// readLinksOf reads a JSON document that is an array of links, or an object
// whose member member is that array; small holds the other members that are
// read (the rest are skipped). found says whether the object had member.
func (p *parser) readLinksOf(in io.Reader, what, member, want string, small []string, read func(pos Position, o *object)) (found bool, count int, values map[string]json.RawMessage, err error) {
	j := newJSONIn(in, what)
	d, err := j.open()
	if err != nil {
		return false, 0, nil, err
	}
	if d == '[' {
		count, err = p.elements(j, true, "", want, read)
		if err == nil {
			err = j.end()
		}
		return true, count, nil, err
	}
	values = map[string]json.RawMessage{}
	err = j.members(func(name string) error {
		var err error
		switch {
		case name == member:
			found = true
			count, err = p.elements(j, false, member, want, read)
		case contains(small, name):
			values[name], err = j.raw()
		default:
			err = j.skip()
		}
		return err
	})
	if err == nil {
		err = j.end()
	}
	return found, count, values, err
}

// readBitlyJSON reads Bitly's GET /v4/groups/{group_guid}/bitlinks
// ({"links":[...],"pagination":{...}}, as shlink-importer's
// src/Sources/Bitly/BitlyApiImporter.php reads it) or a bare array of links.
// The code is the path of the first custom bitlink, else of link.
func (p *parser) readBitlyJSON(in io.Reader) error {
	found, _, values, err := p.readLinksOf(in, "a Bitly API answer", "links", "long_url and link", []string{"pagination"}, func(pos Position, o *object) {
		r := row{
			position: pos,
			url:      o.str("long_url"),
			shortURL: o.str("link"),
			title:    o.str("title"),
			tags:     o.strings("tags"),
			expires:  o.str("expiration_at"),
		}
		if custom := o.strings("custom_bitlinks"); len(custom) > 0 {
			r.shortURL = newField("custom_bitlinks[0]", custom[0])
		}
		p.addObject(o, r)
	})
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf(`not a Bitly API answer: no "links"; expected the response of GET /v4/groups/{group_guid}/bitlinks`)
	}
	var pagination struct {
		Next  string `json:"next"`
		Total int    `json:"total"`
	}
	if raw, ok := values["pagination"]; ok && json.Unmarshal(raw, &pagination) == nil && pagination.Next != "" {
		p.note("the answer has more pages (pagination.next %s): the links of the other pages are not in this file", pagination.Next)
	}
	return nil
}

// readKuttJSON reads Kutt's GET /api/v2/links ({"total":..,"data":[...]},
// thedevs-network/kutt server/utils/utils.js sanitize.link; shlink-importer
// src/Sources/Kutt/KuttImporter.php) or a bare array of links.
func (p *parser) readKuttJSON(in io.Reader) error {
	found, count, values, err := p.readLinksOf(in, "a Kutt API answer", "data", "address and target", []string{"total", "skip"}, func(pos Position, o *object) {
		r := row{
			position: pos,
			code:     o.str("address"),
			url:      o.str("target"),
			shortURL: o.str("link"),
			domain:   o.str("domain"),
			title:    o.str("description"),
			expires:  o.str("expire_in"),
			visits:   o.str("visit_count"),
		}
		if password, _ := o.boolean("password"); password {
			r.refuse = "the link has a password on Kutt and a ShortLink cannot ask for one: importing it would open it to everyone"
		}
		if banned, _ := o.boolean("banned"); banned {
			r.refuse = "the link is banned on Kutt (it does not redirect there)"
		}
		p.addObject(o, r)
	})
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf(`not a Kutt API answer: no "data"; expected the response of GET /api/v2/links`)
	}
	var total *int
	var skip int
	if raw, ok := values["total"]; ok {
		if err := json.Unmarshal(raw, &total); err != nil {
			return fmt.Errorf("not a Kutt API answer: total: %v", err)
		}
	}
	if raw, ok := values["skip"]; ok {
		if err := json.Unmarshal(raw, &skip); err != nil {
			return fmt.Errorf("not a Kutt API answer: skip: %v", err)
		}
	}
	if total != nil && skip+count < *total {
		p.note("the answer holds links %d-%d of %d: ask for the others with skip and limit (or all=true for an admin)", skip+1, skip+count, *total)
	}
	return nil
}

// readSinkJSON reads Sink's export ({"version":"1.0","links":[...],
// "list_complete":true}, miantiao-me/Sink server/api/link/export.get.ts and
// shared/schemas/link.ts) or a bare array of its links.
func (p *parser) readSinkJSON(in io.Reader) error {
	found, _, values, err := p.readLinksOf(in, "a Sink export", "links", "slug and url", []string{"cursor", "list_complete"}, func(pos Position, o *object) {
		r := row{
			position: pos,
			code:     o.str("slug"),
			url:      o.str("url"),
			title:    o.str("title"),
			tags:     o.strings("tags"),
		}
		// Sink keeps Unix seconds.
		if expiration := o.str("expiration"); expiration.set {
			seconds, err := strconv.ParseInt(expiration.value, 10, 64)
			if err != nil {
				p.skip(pos, "invalid expiration %q: want Unix seconds", expiration.value)
				return
			}
			r.expires = field{name: "expiration", value: time.Unix(seconds, 0).UTC().Format(time.RFC3339), set: true}
		}
		if forward, set := o.boolean("redirectWithQuery"); set {
			r.forwardQuery = newField("redirectWithQuery", strconv.FormatBool(forward))
		}
		if password := o.str("password"); password.set {
			r.refuse = "the link has a password on Sink and a ShortLink cannot ask for one: importing it would open it to everyone"
		}
		for _, routing := range []string{"geo", "apple", "google"} {
			if raw := bytes.TrimSpace(o.members[routing]); !isNull(raw) && string(raw) != "{}" && string(raw) != `""` {
				p.count("%d link(s) have geo or device targets (geo, apple, google) that a ShortLink does not have: they redirect everyone to url")
				break
			}
		}
		p.addObject(o, r)
	})
	if err != nil {
		return err
	}
	if !found {
		return fmt.Errorf(`not a Sink export: no "links"; expected the response of GET /api/link/export`)
	}
	var cursor string
	var complete *bool
	if raw, ok := values["list_complete"]; ok {
		if err := json.Unmarshal(raw, &complete); err != nil {
			return fmt.Errorf("not a Sink export: list_complete: %v", err)
		}
	}
	if raw, ok := values["cursor"]; ok {
		if err := json.Unmarshal(raw, &cursor); err != nil {
			return fmt.Errorf("not a Sink export: cursor: %v", err)
		}
	}
	if complete != nil && !*complete {
		p.note("the export is not complete (list_complete false): ask again with cursor=%s for the next page", cursor)
	}
	return nil
}

// isNull reports whether a trimmed JSON value is absent or null.
func isNull(raw []byte) bool { return len(raw) == 0 || string(raw) == "null" }
