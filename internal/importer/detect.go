package importer

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// describe says in a few words what a format is, for messages.
func describe(f Format) string {
	switch f {
	case FormatCSV:
		return "linkforge's CSV: url,code,expires,max_uses"
	case FormatYOURLSSQL:
		return "a MySQL dump of the YOURLS URL table"
	case FormatYOURLSTable:
		return "the YOURLS URL table as CSV or JSON rows: keyword,url,title,timestamp,ip,clicks"
	case FormatYOURLSCSV:
		return "the YOURLS-Import-Export plugin's CSV: source,target,hits"
	case FormatYOURLSXML:
		return "the YOURLS-Import-Export plugin's XML: <redirection>"
	case FormatYOURLSAPI:
		return "a YOURLS API answer: action=stats, or action=shlink-list of the Shlink import plugin"
	case FormatShlinkCSV:
		return "the CSV Shlink's importer reads: Long URL, Short code or Short URL, Domain, Title, Tags"
	case FormatShlinkExport:
		return "the Shlink web client's CSV export: createdAt,domain,shortCode,shortUrl,longUrl,title,tags,visits"
	case FormatShlinkAPI:
		return `Shlink's GET /rest/v3/short-urls: {"shortUrls":{"data":[...]}}`
	case FormatBitlyAPI:
		return `Bitly's GET /v4/groups/{guid}/bitlinks: {"links":[{"long_url":...,"link":...}]}`
	case FormatBitlyCSV:
		return "a Bitly CSV: a long URL column and a Bitlink column"
	case FormatDubCSV:
		return "dub's links export: Short link,Destination URL,Clicks,..."
	case FormatKuttAPI:
		return `Kutt's GET /api/v2/links: {"data":[{"address":...,"target":...}]}`
	case FormatSinkJSON:
		return `Sink's export: {"links":[{"slug":...,"url":...}]}`
	}
	return string(f)
}

// FormatHelp is one line per format, for the usage text.
func FormatHelp() string {
	var b strings.Builder
	for _, f := range Formats {
		fmt.Fprintf(&b, "  %-14s %s\n", f, describe(f))
	}
	return b.String()
}

func looksLikeJSON(data []byte) bool {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	return len(trimmed) > 0 && (trimmed[0] == '{' || trimmed[0] == '[')
}

// sqlStart is how a MySQL dump starts: a comment, or a statement.
var sqlStart = regexp.MustCompile(`(?i)^\s*(--[ \t\r\n]|#|/\*|(insert|replace|create|set|drop|lock|unlock|use|start|begin|alter)\s)`)

// Detect tells the format from the content: XML is the YOURLS plugin's,
// JSON by its members, an SQL dump by its first statement, CSV by its
// header. The error says what was tried, so the user knows which --format
// to pass.
func Detect(data []byte) (Format, error) {
	return detect(bytes.TrimPrefix(data, utf8BOM), true)
}

// detect tells the format of an input that starts with data: all of it when
// complete, else its first detectPeek bytes.
func detect(data []byte, complete bool) (Format, error) {
	trimmed := bytes.TrimLeft(data, " \t\r\n")
	switch {
	case bytes.HasPrefix(trimmed, []byte("<")):
		if bytes.Contains(trimmed, []byte("<redirection")) {
			return FormatYOURLSXML, nil
		}
		return "", errors.New("cannot tell the format: the input is XML, but the only XML read is the YOURLS-Import-Export plugin's (<redirection>)")
	case looksLikeJSON(data):
		top, err := jsonStart(data, complete)
		if err != nil {
			return "", fmt.Errorf("cannot tell the format: the input starts like JSON but is not valid JSON (%v); fix it or pass --format", err)
		}
		return detectJSON(top)
	case sqlStart.Match(data):
		return FormatYOURLSSQL, nil
	}
	header, err := csvHeader(data)
	if err != nil {
		return "", fmt.Errorf("cannot tell the format: tried XML, JSON and SQL (it starts with none of <, {, [ or an SQL statement) and CSV (no header row: %v); pass --format (%s)", err, FormatNames())
	}
	names := map[string]bool{}
	anyContains := func(part string) bool {
		for name := range names {
			if strings.Contains(name, part) {
				return true
			}
		}
		return false
	}
	for _, h := range header {
		names[normalizeColumn(h)] = true
	}
	switch {
	case names["source"] && names["target"]:
		return FormatYOURLSCSV, nil
	case names["keyword"]:
		return FormatYOURLSTable, nil
	case anyContains("bitlink") || anyContains("bitly"):
		return FormatBitlyCSV, nil
	case names["longurl"] && names["shorturl"] && names["createdat"] && names["visits"]:
		return FormatShlinkExport, nil
	case names["longurl"]:
		return FormatShlinkCSV, nil
	case names["shortlink"] && names["destinationurl"], names["link"] && names[headerURL]:
		return FormatDubCSV, nil
	case names[headerURL]:
		return FormatCSV, nil
	}
	return "", fmt.Errorf("cannot tell the format: tried XML, JSON, SQL and CSV, whose header %q has no url column (linkforge CSV), no keyword (YOURLS table), no source and target (YOURLS plugin), no Long URL (Shlink), no Bitlink (Bitly) and no Short link and Destination URL (dub); fix the header or pass --format (%s)", header, FormatNames())
}

// formatByMembers tells a link object's format by its members.
func formatByMembers(link map[string]any) Format {
	has := func(name string) bool { _, ok := link[name]; return ok }
	switch {
	case has("keyword"):
		return FormatYOURLSTable
	case has("shortCode") || has("longUrl"):
		return FormatShlinkAPI
	case has("long_url"):
		return FormatBitlyAPI
	case has("address") || has("target"):
		return FormatKuttAPI
	case has("slug"):
		return FormatSinkJSON
	}
	return ""
}

// firstObject is the first element of v if v is an array that starts with
// an object.
func firstObject(v any) map[string]any {
	if list, ok := v.([]any); ok && len(list) > 0 {
		first, _ := list[0].(map[string]any)
		return first
	}
	return nil
}

// jsonStart decodes a JSON document for detectJSON: all of it when data is
// complete; else the part of it data holds, where each array keeps its first
// element only (the members of a link tell the format, and the prefix of a
// big export holds the first link).
func jsonStart(data []byte, complete bool) (any, error) {
	if complete {
		var top any
		err := json.Unmarshal(data, &top)
		return top, err
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	top, err := skeleton(dec)
	if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
		err = nil // the prefix ends; the input goes on
	}
	return top, err
}

// skeleton decodes one value, keeping only the first element of an array;
// a value cut short is returned as far as it was read, with the error.
func skeleton(dec *json.Decoder) (any, error) {
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	switch tok {
	case json.Delim('{'):
		object := map[string]any{}
		for dec.More() {
			key, err := dec.Token()
			if err != nil {
				return object, err
			}
			name, _ := key.(string)
			value, err := skeleton(dec)
			object[name] = value
			if err != nil {
				return object, err
			}
		}
		_, err := dec.Token()
		return object, err
	case json.Delim('['):
		list := []any{}
		for i := 0; dec.More(); i++ {
			value, err := skeleton(dec)
			if i == 0 {
				list = append(list, value)
			}
			if err != nil {
				return list, err
			}
		}
		_, err := dec.Token()
		return list, err
	}
	return tok, nil
}

func detectJSON(top any) (Format, error) {
	switch v := top.(type) {
	case map[string]any:
		has := func(name string) bool { _, ok := v[name]; return ok }
		_, linksIsObject := v["links"].(map[string]any)
		_, linksIsArray := v["links"].([]any)
		switch {
		case has("shortUrls"):
			return FormatShlinkAPI, nil
		case has("result") && (has("statusCode") || has("message")):
			return FormatYOURLSAPI, nil
		case linksIsObject && (has("stats") || has("statusCode")):
			return FormatYOURLSAPI, nil
		case linksIsArray:
			if f := formatByMembers(firstObject(v["links"])); f == FormatBitlyAPI || f == FormatSinkJSON {
				return f, nil
			}
			if has("list_complete") || has("exportedAt") {
				return FormatSinkJSON, nil
			}
			if has("pagination") {
				return FormatBitlyAPI, nil
			}
		case has("data"):
			if f := formatByMembers(firstObject(v["data"])); f == FormatKuttAPI {
				return f, nil
			}
			if has("total") && has("skip") {
				return FormatKuttAPI, nil
			}
		}
	case []any:
		if f := formatByMembers(firstObject(v)); f != "" {
			return f, nil
		}
	}
	return "", fmt.Errorf(`cannot tell the format: tried JSON, but it is none of: %s; %s; %s; %s; %s; %s, or an array of their links; pass --format (%s)`,
		describe(FormatShlinkAPI), describe(FormatYOURLSAPI), describe(FormatBitlyAPI), describe(FormatKuttAPI), describe(FormatSinkJSON), describe(FormatYOURLSTable), FormatNames())
}
