package importer

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// maxLabelName is the length limit of a label key's name part.
const maxLabelName = validation.LabelValueMaxLength // 63, the same for names and values

// labels turns tags into labels tag.linkforge.io/<name>: "true", so that
// `kubectl get shortlinks -l tag.linkforge.io/<name>` finds a tag's links.
// A tag that is not a valid label name is rewritten (labelName), and each
// rewrite is reported once as a note; a tag with nothing left is reported
// and not kept.
func (p *parser) labels(tags []string) map[string]string {
	var out map[string]string
	for _, tag := range tags {
		tag = strings.TrimSpace(tag)
		if tag == "" {
			continue
		}
		key, seen := p.tagLabels[tag]
		if !seen {
			name := labelName(tag)
			switch {
			case name == "":
				p.note("tag %q has no letter or digit a label name can keep: it is not kept", tag)
			case name != tag:
				p.note("tag %q is label %s%s: a label name is at most 63 of A-Z a-z 0-9 - _ . and starts and ends with a letter or digit", tag, TagLabelPrefix, name)
			}
			if name != "" {
				key = TagLabelPrefix + name
			}
			p.tagLabels[tag] = key
		}
		if key == "" {
			continue
		}
		if out == nil {
			out = map[string]string{}
		}
		out[key] = "true"
	}
	return out
}

// labelName makes tag a valid label name: every run of characters a name
// cannot hold (spaces, '/', ':', non-ASCII letters...) becomes one '-', the
// ends are trimmed to a letter or digit, and the result is cut to 63
// characters. Case is kept: label names are case-sensitive, as tags are.
func labelName(tag string) string {
	var b strings.Builder
	pendingDash := false
	for _, r := range tag {
		ok := r < 0x80 && (r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '-' || r == '_' || r == '.')
		if !ok {
			pendingDash = true
			continue
		}
		if pendingDash && b.Len() > 0 {
			b.WriteByte('-')
		}
		pendingDash = false
		b.WriteRune(r)
	}
	name := trimToAlnum(b.String())
	if len(name) > maxLabelName {
		name = trimToAlnum(name[:maxLabelName])
	}
	return name
}

func trimToAlnum(s string) string {
	isAlnum := func(r rune) bool {
		return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9'
	}
	return strings.TrimFunc(s, func(r rune) bool { return !isAlnum(r) })
}

// splitTags splits a cell of tags as Shlink's importer does: on ',' when
// the cell has one (the Shlink web client's older export, dub), else on
// '|' (the current export).
func splitTags(cell string) []string {
	sep := "|"
	if strings.Contains(cell, ",") {
		sep = ","
	}
	var tags []string
	for _, tag := range strings.Split(cell, sep) {
		if tag = strings.TrimSpace(tag); tag != "" {
			tags = append(tags, tag)
		}
	}
	return tags
}
