package devenv

import (
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Signal sends sig to the process (SIGKILL to test crashes, SIGSTOP and
// SIGCONT to pause it).
func (p *Process) Signal(sig syscall.Signal) error {
	return p.current().Process.Signal(sig)
}

// APIServerPID finds the kube-apiserver process of the control plane (by its
// secure port), to pause it with SIGSTOP: a hung API server, not a refused
// connection.
func (c *ControlPlane) APIServerPID() (int, error) {
	u, err := url.Parse(c.Config.Host)
	if err != nil {
		return 0, err
	}
	want := "--secure-port=" + u.Port()
	dirs, err := filepath.Glob("/proc/[0-9]*/cmdline")
	if err != nil {
		return 0, err
	}
	for _, path := range dirs {
		b, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		args := strings.Split(string(b), "\x00")
		if len(args) == 0 || filepath.Base(args[0]) != "kube-apiserver" {
			continue
		}
		for _, a := range args {
			if a == want {
				var pid int
				_, err := fmt.Sscanf(filepath.Base(filepath.Dir(path)), "%d", &pid)
				return pid, err
			}
		}
	}
	return 0, fmt.Errorf("no kube-apiserver process with %s", want)
}

// Pid is the process id, to read its resource use from /proc.
func (p *Process) Pid() int { return p.current().Process.Pid }
