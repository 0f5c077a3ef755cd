// Package intern keeps one copy of strings that repeat across many cached
// objects (namespaces, condition types, reasons, states).
//
// unique.Make(s).Value() is not enough on its own: the unique package drops
// its canonical copy once no Handle is left, so a caller that keeps only the
// string shares it within one GC cycle at best. This table keeps every value
// it has seen, so it is for values from small sets only.
package intern

import "sync"

var table sync.Map // string -> string

// String returns the one copy of s that the table keeps.
func String(s string) string {
	if v, ok := table.Load(s); ok {
		return v.(string)
	}
	v, _ := table.LoadOrStore(s, s)
	return v.(string)
}
