package main

import (
	"context"
	"os"
	"strings"
)

// iptablesTables are the tables the kubelet and kube-proxy add chains to.
var iptablesTables = []string{"filter", "nat", "mangle"}

// kubeChains lists the KUBE-* chains of table.
func kubeChains(ctx context.Context, table string) []string {
	out, err := run(ctx, "iptables-save", "-t", table)
	if err != nil {
		return nil
	}
	var chains []string
	for _, line := range strings.Split(out, "\n") {
		if strings.HasPrefix(line, ":KUBE-") {
			chains = append(chains, strings.Fields(line[1:])[0])
		}
	}
	return chains
}

// saveChains records the KUBE-* chains there are before up, so down
// removes only those the node added.
func saveChains(ctx context.Context, c *config) error {
	var b strings.Builder
	for _, t := range iptablesTables {
		for _, ch := range kubeChains(ctx, t) {
			b.WriteString(t + " " + ch + "\n")
		}
	}
	return writeFile(c.conf("chains.saved"), b.String())
}

// removeChains removes the KUBE-* chains the node's kubelet and kube-proxy
// left (kube-proxy --cleanup removes its own; the kubelet's canaries
// stay): the rules that jump to them, then the chains.
func removeChains(ctx context.Context, c *config) {
	saved, err := os.ReadFile(c.conf("chains.saved"))
	if err != nil {
		return // up never got as far
	}
	before := map[string]bool{}
	for _, line := range strings.Split(string(saved), "\n") {
		before[line] = true
	}
	for _, t := range iptablesTables {
		var mine []string
		for _, ch := range kubeChains(ctx, t) {
			if !before[t+" "+ch] {
				mine = append(mine, ch)
			}
		}
		if len(mine) == 0 {
			continue
		}
		out, _ := run(ctx, "iptables-save", "-t", t)
		for _, line := range strings.Split(out, "\n") {
			// -A CHAIN ... -j KUBE-X: delete the rule wherever it is.
			if !strings.HasPrefix(line, "-A ") {
				continue
			}
			for _, ch := range mine {
				if strings.HasSuffix(line, "-j "+ch) || strings.Contains(line, "-j "+ch+" ") {
					args := append([]string{"-w", "-t", t, "-D"}, splitRule(line[3:])...)
					if _, err := run(ctx, "iptables", args...); err != nil {
						logf("%v", err)
					}
					break
				}
			}
		}
		for _, op := range []string{"-F", "-X"} {
			for _, ch := range mine {
				_, _ = run(ctx, "iptables", "-w", "-t", t, op, ch)
			}
		}
	}
}

// splitRule splits an iptables-save rule into arguments, keeping quoted
// comments whole.
func splitRule(rule string) []string {
	var args []string
	var cur strings.Builder
	quoted := false
	for _, r := range rule {
		switch {
		case r == '"':
			quoted = !quoted
		case r == ' ' && !quoted:
			if cur.Len() > 0 {
				args = append(args, cur.String())
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
		}
	}
	if cur.Len() > 0 {
		args = append(args, cur.String())
	}
	return args
}
