package devenv

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// script writes a shell script that logs "run N" and then acts by its run
// number: runs before `settle` exit 1 after logging `last`, later ones
// stay up until SIGTERM, then exit 0.
func script(t *testing.T, settle int, last string) (bin, counter string) {
	t.Helper()
	dir := t.TempDir()
	counter = filepath.Join(dir, "runs")
	bin = filepath.Join(dir, "proc.sh")
	// The trap comes before "run N": a test stops the process as soon as
	// it reads that line, and a SIGTERM before the trap ended it by the
	// signal (the CI run of c5d5b7e failed so at load 18).
	body := `#!/bin/sh
trap 'exit 0' TERM
n=$(( $(cat "` + counter + `" 2>/dev/null || echo 0) + 1 ))
echo $n > "` + counter + `"
echo "run $n"
if [ $n -lt ` + string(rune('0'+settle)) + ` ]; then echo "` + last + `"; exit 1; fi
while :; do sleep 0.05; done
`
	if err := os.WriteFile(bin, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return bin, counter
}

func TestStartRestartingRestartsOnlyWhatThePolicyAllows(t *testing.T) {
	t.Run("exits the policy matches are restarted, the log kept whole", func(t *testing.T) {
		bin, _ := script(t, 3, "manager: leader election lost")
		log := filepath.Join(t.TempDir(), "p.log")
		p, err := StartRestarting("p", log, bin, LostLeaderElection)
		if err != nil {
			t.Fatal(err)
		}
		// The script's runs start in milliseconds: 10s is a generous multiple on a busy machine.
		NewWithT(t).Eventually(func() string {
			b, _ := os.ReadFile(log)
			return string(b)
		}, 10*time.Second, 10*time.Millisecond).Should(ContainSubstring("run 3"))
		if p.Exited() {
			t.Fatal("the process ended; want it restarted")
		}
		if got := p.Restarts(); len(got) != 2 || got[0] != "manager: leader election lost" {
			t.Errorf("restarts %q, want two after the lost lease", got)
		}
		if err := p.Stop(10 * time.Second); err != nil {
			t.Errorf("stop: %v", err)
		}
		b, _ := os.ReadFile(log)
		if want := "run 1\nmanager: leader election lost\nrun 2\nmanager: leader election lost\nrun 3\n"; string(b) != want {
			t.Errorf("log %q, want %q", b, want)
		}
	})
	t.Run("any other exit ends it", func(t *testing.T) {
		bin, counter := script(t, 3, "panic: something else")
		p, err := StartRestarting("p", filepath.Join(t.TempDir(), "p.log"), bin, LostLeaderElection)
		if err != nil {
			t.Fatal(err)
		}
		waitEnded(t, p)
		if err := p.Stop(time.Second); err == nil {
			t.Error("the exit status 1 was not returned")
		}
		if b, _ := os.ReadFile(counter); strings.TrimSpace(string(b)) != "1" || len(p.Restarts()) != 0 {
			t.Errorf("runs %q, restarts %q: want one run, none", b, p.Restarts())
		}
	})
	t.Run("without a policy, a lost lease ends it", func(t *testing.T) {
		bin, _ := script(t, 3, "manager: leader election lost")
		p, err := Start("p", filepath.Join(t.TempDir(), "p.log"), bin)
		if err != nil {
			t.Fatal(err)
		}
		waitEnded(t, p)
	})
}

// waitEnded waits for p to end: the scripts exit in milliseconds, so 10s is
// a generous multiple on a busy machine.
func waitEnded(t *testing.T, p *Process) {
	t.Helper()
	select {
	case <-p.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the process did not end")
	}
}
