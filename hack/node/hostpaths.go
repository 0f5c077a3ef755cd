package main

import (
	"os"
	"path/filepath"
	"strings"
)

// hostPaths are the directories outside the state and run directories that
// the kubelet, containerd and CNI make whatever they are told (the
// kubelet's device plugins and log links, the shims' sockets, CNI's
// cache). up records which exist; down removes those that did not, and
// from those that did only what the node put there.
var hostPaths = []string{"/var/lib/kubelet", "/var/log/containers", "/var/log/pods", "/run/containerd", "/var/lib/cni"}

func saveHostPaths(c *config) error {
	var existing []string
	for _, p := range hostPaths {
		if _, err := os.Lstat(p); err == nil {
			existing = append(existing, p)
		}
	}
	return writeFile(c.conf("paths.saved"), strings.Join(existing, "\n")+"\n")
}

func removeHostPaths(c *config) {
	saved, err := os.ReadFile(c.conf("paths.saved"))
	if err != nil {
		return // up never got as far
	}
	existed := map[string]bool{}
	for _, p := range strings.Fields(string(saved)) {
		existed[p] = true
	}
	for _, p := range hostPaths {
		if !existed[p] {
			if err := os.RemoveAll(p); err != nil {
				logf("%v", err)
			}
		}
	}
	if existed["/var/lib/cni"] {
		results, _ := filepath.Glob("/var/lib/cni/results/linkforge-node-*")
		for _, r := range results {
			_ = os.Remove(r)
		}
	}
	if existed["/var/log/containers"] {
		links, _ := filepath.Glob("/var/log/containers/*.log")
		for _, l := range links {
			if target, err := os.Readlink(l); err == nil && strings.HasPrefix(target, c.stateDir+"/") {
				_ = os.Remove(l)
			}
		}
	}
}
