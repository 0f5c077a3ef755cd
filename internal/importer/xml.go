package importer

import (
	"encoding/xml"
	"errors"
	"fmt"
	"io"
	"strings"
)

// yourlsXMLItem is one <item> of the YOURLS-Import-Export plugin's XML
// (GautamGupta/YOURLS-Import-Export fileio/xml.php, after WordPress'
// Redirection plugin): <source>/keyword/</source>, <action>URL</action>,
// <statistic count="clicks"/>.
type yourlsXMLItem struct {
	ID        string `xml:"id,attr"`
	Source    string `xml:"source"`
	Title     string `xml:"title"`
	Action    string `xml:"action"`
	Statistic struct {
		Count string `xml:"count,attr"`
	} `xml:"statistic"`
}

// readYOURLSXML streams the items, so that one bad item is reported with its
// line and the others are kept.
func (p *parser) readYOURLSXML(in io.Reader) error {
	decoder := xml.NewDecoder(in)
	// PHP's htmlspecialchars writes &#039; and nothing else outside XML's
	// own entities; Strict stays on.
	sawRoot := false
	for {
		line, _ := decoder.InputPos()
		token, err := decoder.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			var syntax *xml.SyntaxError
			if errors.As(err, &syntax) {
				line = syntax.Line
			}
			p.skip(Position{Line: line}, "XML syntax error: %v; the rest of the file was not read", err)
			return nil
		}
		start, ok := token.(xml.StartElement)
		if !ok {
			continue
		}
		if !sawRoot {
			if start.Name.Local != "redirection" {
				return fmt.Errorf("not a YOURLS-Import-Export XML file: the root element is <%s>, not <redirection>", start.Name.Local)
			}
			sawRoot = true
			continue
		}
		if start.Name.Local != "item" {
			continue
		}
		var item yourlsXMLItem
		if err := decoder.DecodeElement(&item, &start); err != nil {
			p.skip(Position{Line: line}, "XML syntax error in <item>: %v; the rest of the file was not read", err)
			return nil
		}
		p.add(row{
			position: Position{Line: line},
			shortURL: newField("source", item.Source),
			url:      newField("action", item.Action),
			title:    newField("title", item.Title),
			visits:   newField("statistic count", strings.TrimSpace(item.Statistic.Count)),
		})
	}
	if !sawRoot {
		return fmt.Errorf("not a YOURLS-Import-Export XML file: no <redirection> element")
	}
	return nil
}
