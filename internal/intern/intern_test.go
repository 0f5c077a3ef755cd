package intern

import (
	"runtime"
	"strings"
	"testing"
	"unsafe"
)

func TestStringKeepsOneCopy(t *testing.T) {
	a := String(strings.Clone("team-a"))
	runtime.GC() // the table, unlike unique.Make without a Handle, keeps it
	b := String(strings.Clone("team-a"))
	if a != "team-a" || unsafe.StringData(a) != unsafe.StringData(b) {
		t.Errorf("two copies of %q: %p and %p", a, unsafe.StringData(a), unsafe.StringData(b))
	}
	if c := String(strings.Clone("team-b")); unsafe.StringData(c) == unsafe.StringData(a) {
		t.Error("different strings share a copy")
	}
}
