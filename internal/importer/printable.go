package importer

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Printable escapes what a terminal would act on rather than show: control
// characters (ESC starts the escape sequences that move the cursor, retitle
// the window or recolour the text; CR and BS overwrite what was printed),
// other runes unicode.IsPrint refuses (bidirectional overrides, zero-width
// characters) and bytes that are not UTF-8. Each becomes its Go escape
// (\x1b, \r, \u202e, \xff); everything else, backslashes included, is kept,
// so a message that quoted a value with %q reads the same, and Printable of
// a printable string is that string.
//
// Every message of the importer (Result.Skipped, Result.Notes, the errors of
// Parse) has been through it; the CLI passes its own lines through it too,
// as they name files and echo what the cluster holds.
func Printable(s string) string {
	clean := true
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if !printableRune(r, size) {
			clean = false
			break
		}
		i += size
	}
	if clean {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && size == 1:
			b.WriteString(`\x`)
			b.WriteString(strconv.FormatUint(uint64(s[i])>>4, 16))
			b.WriteString(strconv.FormatUint(uint64(s[i])&0xf, 16))
		case printableRune(r, size):
			b.WriteString(s[i : i+size])
		default:
			q := strconv.QuoteRune(r) // '\x1b', '\u202e', '\t'
			b.WriteString(q[1 : len(q)-1])
		}
		i += size
	}
	return b.String()
}

func printableRune(r rune, size int) bool {
	if r == utf8.RuneError && size == 1 {
		return false
	}
	return r == ' ' || unicode.IsPrint(r)
}
