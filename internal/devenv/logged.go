package devenv

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

// StartLogged is Start for a test: bin runs with args as name, its output
// in dir/name.log, stopped when t ends (15 s grace), with the log's last
// 4000 bytes in t's output if t failed.
func StartLogged(t testing.TB, dir, name, bin string, args ...string) *Process {
	t.Helper()
	p, err := Start(name, filepath.Join(dir, name+".log"), bin, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := p.Stop(15 * time.Second); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			if b, err := os.ReadFile(p.Log); err == nil {
				t.Logf("--- %s log ---\n%s", name, b[max(0, len(b)-4000):])
			}
		}
	})
	return p
}
