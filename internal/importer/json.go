package importer

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
)

// jsonField turns one JSON value into a field: strings as they are, numbers
// and booleans in their JSON spelling (exporters differ in whether clicks or
// maxVisits are quoted), null or absent as unset. Objects and arrays are
// not values a ShortLink field can take.
func jsonField(name string, raw json.RawMessage) (field, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
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

// jsonFields reads the named members of a JSON object; the error says which
// member has the wrong type.
func jsonFields(object map[string]json.RawMessage, names ...string) ([]field, error) {
	fields := make([]field, len(names))
	for i, name := range names {
		f, err := jsonField(name, object[name])
		if err != nil {
			return nil, err
		}
		fields[i] = f
	}
	return fields, nil
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

// readYOURLSJSON reads a JSON array of yourls_url rows
// ([{"keyword":"abc","url":"https://...","title":...,"timestamp":...,"ip":...,"clicks":...}]),
// the shape of a JSON dump of the table. The shape is written from the
// YOURLS schema, not from a sample file.
func (p *parser) readYOURLSJSON(data []byte) error {
	elements, err := jsonArray(data, "a YOURLS JSON export (an array of {keyword, url, ...} rows)")
	if err != nil {
		return err
	}
	for i, element := range elements {
		pos := indexPath("", i)
		var object map[string]json.RawMessage
		if err := json.Unmarshal(element, &object); err != nil || object == nil {
			p.skip(pos, "not a JSON object with keyword and url")
			continue
		}
		fields, err := jsonFields(object, "keyword", "url")
		if err != nil {
			p.skip(pos, "%v", err)
			continue
		}
		p.add(row{position: pos, code: fields[0], url: fields[1]})
	}
	return nil
}

// shlinkShortURL is one element of shortUrls.data in the body of Shlink's
// GET /rest/v3/short-urls (written from Shlink's API documentation, not from
// a sample response). Members are raw so that a wrong type is reported for
// the element, not for the file.
type shlinkShortURL struct {
	ShortCode     json.RawMessage `json:"shortCode"`
	LongURL       json.RawMessage `json:"longUrl"`
	ForwardQuery  *bool           `json:"forwardQuery"`
	VisitsCount   json.RawMessage `json:"visitsCount"` // before API v3
	VisitsSummary *struct {
		Total json.RawMessage `json:"total"`
	} `json:"visitsSummary"`
	Meta struct {
		ValidSince json.RawMessage `json:"validSince"`
		ValidUntil json.RawMessage `json:"validUntil"`
		MaxVisits  json.RawMessage `json:"maxVisits"`
	} `json:"meta"`
}

// readShlinkJSON reads the API body {"shortUrls":{"data":[...],"pagination":{...}}}
// or a bare array of its short URLs (pages concatenated by the user).
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
	elements, err := jsonArray(elementsJSON, "shortUrls.data")
	if err != nil {
		return err
	}
	for i, element := range elements {
		pos := indexPath(prefix, i)
		var short shlinkShortURL
		if trimmed := bytes.TrimSpace(element); len(trimmed) == 0 || trimmed[0] != '{' {
			p.skip(pos, "not a Shlink short URL: want a JSON object with shortCode and longUrl")
			continue
		}
		if err := json.Unmarshal(element, &short); err != nil {
			// A member of the wrong type, such as forwardQuery "yes".
			p.skip(pos, "not a Shlink short URL: %v", err)
			continue
		}
		code, err1 := jsonField("shortCode", short.ShortCode)
		url, err2 := jsonField("longUrl", short.LongURL)
		since, err3 := jsonField("meta.validSince", short.Meta.ValidSince)
		until, err4 := jsonField("meta.validUntil", short.Meta.ValidUntil)
		maxVisits, err5 := jsonField("meta.maxVisits", short.Meta.MaxVisits)
		visits, err6 := jsonField("visitsCount", short.VisitsCount)
		var err7 error
		if short.VisitsSummary != nil {
			visits, err7 = jsonField("visitsSummary.total", short.VisitsSummary.Total)
		}
		if err := firstError(err1, err2, err3, err4, err5, err6, err7); err != nil {
			p.skip(pos, "%v", err)
			continue
		}
		r := row{position: pos, code: code, url: url, validSince: since, expires: until, maxUses: maxVisits, visits: visits}
		if short.ForwardQuery != nil {
			r.forwardQuery = newField("forwardQuery", strconv.FormatBool(*short.ForwardQuery))
		}
		p.add(r)
	}
	return nil
}

func firstError(errs ...error) error {
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}
