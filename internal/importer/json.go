package importer

import (
	"bytes"
	"encoding/json"
	"fmt"
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

// jsonArray splits a JSON array into its elements, so that one malformed
// element is reported with its index instead of failing the whole file.
func jsonArray(data []byte, what string) ([]json.RawMessage, error) {
	var elements []json.RawMessage
	if err := json.Unmarshal(data, &elements); err != nil {
		return nil, fmt.Errorf("%s is not a JSON array: %v", what, err)
	}
	return elements, nil
}

func indexPath(prefix string, i int) Position {
	return Position{Path: prefix + "[" + strconv.Itoa(i) + "]"}
}

// envelope reads the members of a top-level JSON object.
func envelope(data []byte, what string) (map[string]json.RawMessage, error) {
	var top map[string]json.RawMessage
	if err := json.Unmarshal(data, &top); err != nil {
		return nil, fmt.Errorf("not %s: %v", what, err)
	}
	return top, nil
}

// forEach reads each element of the array at prefix as an object and hands
// it to read; an element that is not an object is reported.
func (p *parser) forEach(elementsJSON []byte, prefix, want string, read func(pos Position, o *object)) error {
	elements, err := jsonArray(elementsJSON, strings.TrimPrefix(prefix+" (the links)", " "))
	if err != nil {
		return err
	}
	for i, element := range elements {
		pos := indexPath(prefix, i)
		o, ok := decodeObject(element)
		if !ok {
			p.skip(pos, "not a %s: want a JSON object with %s", p.result.Format.displayName()+" link", want)
			continue
		}
		read(pos, o)
	}
	return nil
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
func (p *parser) readYOURLSRows(data []byte) error {
	return p.forEach(data, "", "keyword and url", func(pos Position, o *object) {
		p.addObject(o, row{position: pos, code: o.str("keyword"), url: o.str("url"), title: o.str("title"), visits: o.str("clicks")})
	})
}

// readYOURLSAPI reads YOURLS' yourls-api.php answers in JSON: the stats
// action ({"links":{"link_1":{"shorturl":...,"url":...}},"stats":{...}},
// includes/functions.php yourls_get_stats) and the shlink-list action of
// acelaya/yourls-shlink-import-plugin ({"result":[{keyword,url,...}]}).
func (p *parser) readYOURLSAPI(data []byte) error {
	top, err := envelope(data, "a YOURLS API answer")
	if err != nil {
		return err
	}
	if result, ok := top["result"]; ok {
		return p.forEach(result, "result", "keyword and url", func(pos Position, o *object) {
			p.addObject(o, row{position: pos, code: o.str("keyword"), url: o.str("url"), title: o.str("title"), visits: o.str("clicks")})
		})
	}
	rawLinks, ok := top["links"]
	if !ok {
		if _, hasStats := top["stats"]; hasStats {
			p.note("the answer has no links: ask the stats action with a limit, e.g. action=stats&filter=top&limit=<total_links>")
			return nil
		}
		return fmt.Errorf(`not a YOURLS API answer: no "links" (action=stats) or "result" (action=shlink-list)`)
	}
	var links map[string]json.RawMessage
	if err := json.Unmarshal(rawLinks, &links); err != nil {
		return fmt.Errorf(`not a YOURLS stats answer: "links" is not a JSON object of link_1, link_2...: %v`, err)
	}
	// PHP writes link_1, link_2... in order; a map loses that order.
	names := sortedKeys(links)
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
		o, ok := decodeObject(links[name])
		if !ok {
			p.skip(pos, "not a YOURLS link: want a JSON object with shorturl and url")
			continue
		}
		p.addObject(o, row{position: pos, shortURL: o.str("shorturl"), url: o.str("url"), title: o.str("title"), visits: o.str("clicks")})
	}
	var stats struct {
		TotalLinks json.Number `json:"total_links"`
	}
	if raw, ok := top["stats"]; ok && json.Unmarshal(raw, &stats) == nil {
		if total, err := strconv.Atoi(stats.TotalLinks.String()); err == nil && total > len(links) {
			p.note("the answer holds %d of the %d links: the stats action returns at most its limit; ask again with limit=%d", len(links), total, total)
		}
	}
	return nil
}

// readShlinkJSON reads the body of Shlink's GET /rest/v3/short-urls
// ({"shortUrls":{"data":[...],"pagination":{...}}}, shlink
// module/Rest/test-api/Action/ListShortUrlsTest.php) or a bare array of its
// short URLs (pages concatenated by the user).
func (p *parser) readShlinkJSON(data []byte) error {
	prefix := ""
	elementsJSON := json.RawMessage(data)
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '{' {
		var body struct {
			ShortURLs *struct {
				Data       json.RawMessage `json:"data"`
				Pagination *struct {
					CurrentPage int `json:"currentPage"`
					PagesCount  int `json:"pagesCount"`
				} `json:"pagination"`
			} `json:"shortUrls"`
		}
		if err := json.Unmarshal(data, &body); err != nil {
			return fmt.Errorf("not a Shlink API body: %v", err)
		}
		if body.ShortURLs == nil || body.ShortURLs.Data == nil {
			return fmt.Errorf(`not a Shlink API body: no shortUrls.data; expected the response of GET /rest/v3/short-urls, {"shortUrls":{"data":[...]}}`)
		}
		if pg := body.ShortURLs.Pagination; pg != nil && pg.PagesCount > 1 {
			p.note("this is page %d of %d of the Shlink API's answer: the other pages are not in this file (ask for all with itemsPerPage=-1, or import each page)", pg.CurrentPage, pg.PagesCount)
		}
		prefix, elementsJSON = "shortUrls.data", body.ShortURLs.Data
	}
	return p.forEach(elementsJSON, prefix, "shortCode and longUrl", func(pos Position, o *object) {
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
	})
}

// readBitlyJSON reads Bitly's GET /v4/groups/{group_guid}/bitlinks
// ({"links":[...],"pagination":{...}}, as shlink-importer's
// src/Sources/Bitly/BitlyApiImporter.php reads it) or a bare array of links.
// The code is the path of the first custom bitlink, else of link.
func (p *parser) readBitlyJSON(data []byte) error {
	prefix := ""
	elementsJSON := json.RawMessage(data)
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '{' {
		top, err := envelope(data, "a Bitly API answer")
		if err != nil {
			return err
		}
		links, ok := top["links"]
		if !ok {
			return fmt.Errorf(`not a Bitly API answer: no "links"; expected the response of GET /v4/groups/{group_guid}/bitlinks`)
		}
		var pagination struct {
			Next  string `json:"next"`
			Total int    `json:"total"`
		}
		if raw, ok := top["pagination"]; ok && json.Unmarshal(raw, &pagination) == nil && pagination.Next != "" {
			p.note("the answer has more pages (pagination.next %s): the links of the other pages are not in this file", pagination.Next)
		}
		prefix, elementsJSON = "links", links
	}
	return p.forEach(elementsJSON, prefix, "long_url and link", func(pos Position, o *object) {
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
}

// readKuttJSON reads Kutt's GET /api/v2/links ({"total":..,"data":[...]},
// thedevs-network/kutt server/utils/utils.js sanitize.link; shlink-importer
// src/Sources/Kutt/KuttImporter.php) or a bare array of links.
func (p *parser) readKuttJSON(data []byte) error {
	prefix := ""
	elementsJSON := json.RawMessage(data)
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '{' {
		var body struct {
			Data  json.RawMessage `json:"data"`
			Total *int            `json:"total"`
			Skip  int             `json:"skip"`
		}
		if err := json.Unmarshal(data, &body); err != nil {
			return fmt.Errorf("not a Kutt API answer: %v", err)
		}
		if body.Data == nil {
			return fmt.Errorf(`not a Kutt API answer: no "data"; expected the response of GET /api/v2/links`)
		}
		prefix, elementsJSON = "data", body.Data
		var elements []json.RawMessage
		if json.Unmarshal(body.Data, &elements) == nil && body.Total != nil && body.Skip+len(elements) < *body.Total {
			p.note("the answer holds links %d-%d of %d: ask for the others with skip and limit (or all=true for an admin)", body.Skip+1, body.Skip+len(elements), *body.Total)
		}
	}
	return p.forEach(elementsJSON, prefix, "address and target", func(pos Position, o *object) {
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
}

// readSinkJSON reads Sink's export ({"version":"1.0","links":[...],
// "list_complete":true}, miantiao-me/Sink server/api/link/export.get.ts and
// shared/schemas/link.ts) or a bare array of its links.
func (p *parser) readSinkJSON(data []byte) error {
	prefix := ""
	elementsJSON := json.RawMessage(data)
	if trimmed := bytes.TrimSpace(data); len(trimmed) > 0 && trimmed[0] == '{' {
		var body struct {
			Links        json.RawMessage `json:"links"`
			Cursor       string          `json:"cursor"`
			ListComplete *bool           `json:"list_complete"`
		}
		if err := json.Unmarshal(data, &body); err != nil {
			return fmt.Errorf("not a Sink export: %v", err)
		}
		if body.Links == nil {
			return fmt.Errorf(`not a Sink export: no "links"; expected the response of GET /api/link/export`)
		}
		if body.ListComplete != nil && !*body.ListComplete {
			p.note("the export is not complete (list_complete false): ask again with cursor=%s for the next page", body.Cursor)
		}
		prefix, elementsJSON = "links", body.Links
	}
	return p.forEach(elementsJSON, prefix, "slug and url", func(pos Position, o *object) {
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
}

// isNull reports whether a trimmed JSON value is absent or null.
func isNull(raw []byte) bool { return len(raw) == 0 || string(raw) == "null" }
