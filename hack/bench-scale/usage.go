package main

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Memory and CPU of the processes, read from /proc.

type usage struct {
	manager, redirector, apiserver, etcd, etcdDB int64
	// The binaries' RSS of anonymous memory (the heap, stacks, the
	// runtime's): what links cost. The rest is mostly the binary's pages,
	// which grow with the code a first link runs, once.
	managerAnon, redirectorAnon int64
}

// settledMemory is memory in the steady state that follows a phase: read
// every second from 10 s after it, until neither the manager's nor the
// redirector's RSS has fallen by 256 KiB over 3 s, at most 40 s. The Go
// scavenger returns a burst's garbage to the OS over seconds, and the
// manager's GC tuner (controllers.GCTuner) returns it 2-3 s after its last
// busy second: a shorter wait read some runs before that and some after.
// hack/bench-redirect.sh settles in the same spirit.
func (b *bench) settledMemory() usage {
	time.Sleep(10 * time.Second)
	reads := []usage{b.memory()}
	for len(reads) < 31 {
		time.Sleep(time.Second)
		reads = append(reads, b.memory())
		if len(reads) < 4 {
			continue
		}
		prev, cur := reads[len(reads)-4], reads[len(reads)-1]
		if prev.manager-cur.manager < 256<<10 && prev.redirector-cur.redirector < 256<<10 {
			return cur
		}
	}
	return reads[len(reads)-1]
}

func (b *bench) memory() usage {
	var u usage
	if b.mgr != nil && b.rdr != nil {
		u.manager, u.redirector = rss(b.mgr.cmd.Process.Pid), rss(b.rdr.cmd.Process.Pid)
		u.managerAnon, u.redirectorAnon = anonRSS(b.mgr.cmd.Process.Pid), anonRSS(b.rdr.cmd.Process.Pid)
	}
	port := b.env.ControlPlane.APIServer.Port
	u.apiserver = rss(findPid("kube-apiserver", "--secure-port="+port))
	etcdDir := b.env.ControlPlane.Etcd.DataDir
	u.etcd = rss(findPid("etcd", etcdDir))
	if fi, err := os.Stat(filepath.Join(etcdDir, "member", "snap", "db")); err == nil {
		u.etcdDB = fi.Size()
	}
	return u
}

// cpuUse is the CPU time used so far by each process of the benchmark.
type cpuUse struct{ apiserver, etcd, manager, redirector, bench float64 }

func (b *bench) cpu() cpuUse {
	u := cpuUse{
		apiserver: cpuSeconds(findPid("kube-apiserver", "--secure-port="+b.env.ControlPlane.APIServer.Port)),
		etcd:      cpuSeconds(findPid("etcd", b.env.ControlPlane.Etcd.DataDir)),
		bench:     cpuSeconds(os.Getpid()),
	}
	if b.mgr != nil && b.rdr != nil {
		u.manager, u.redirector = cpuSeconds(b.mgr.cmd.Process.Pid), cpuSeconds(b.rdr.cmd.Process.Pid)
	}
	return u
}

// since is the CPU each process used from before to u, in seconds.
func (u cpuUse) since(before cpuUse) string {
	return fmt.Sprintf("kube-apiserver %.0fs, etcd %.0fs, manager %.0fs, redirector %.0fs, the benchmark %.0fs",
		u.apiserver-before.apiserver, u.etcd-before.etcd, u.manager-before.manager, u.redirector-before.redirector, u.bench-before.bench)
}

// cpuSeconds is the CPU time (user and system) pid has used.
func cpuSeconds(pid int) float64 {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The fields after the command name, which is in parentheses.
	i := strings.LastIndexByte(string(stat), ')')
	f := strings.Fields(string(stat[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseFloat(f[11], 64)
	stime, _ := strconv.ParseFloat(f[12], 64)
	return (utime + stime) / 100 // USER_HZ, 100 on Linux
}

// rss is a process's resident memory now; peakRSS its high-water mark.
func rss(pid int) int64     { return procStatusBytes(pid, "VmRSS:") }
func anonRSS(pid int) int64 { return procStatusBytes(pid, "RssAnon:") }
func peakRSS(pid int) int64 { return procStatusBytes(pid, "VmHWM:") }

func procStatusBytes(pid int, field string) int64 {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	defer func() { _ = f.Close() }()
	s := bufio.NewScanner(f)
	for s.Scan() {
		if kb, ok := strings.CutPrefix(s.Text(), field); ok {
			v, _ := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(kb), "kB")), 10, 64)
			return v * 1024
		}
	}
	return 0
}

// findPid finds the process whose executable is named exe and whose command
// line contains arg.
func findPid(exe, arg string) int {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cmdline, err := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		if err != nil {
			continue
		}
		args := strings.Split(string(cmdline), "\x00")
		if filepath.Base(args[0]) == exe && strings.Contains(string(cmdline), arg) {
			return pid
		}
	}
	return 0
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }

// API server metrics.

func loadavg() string {
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(data))
	return strings.Join(f[:3], " ")
}

func numCPU() int {
	data, _ := os.ReadFile("/proc/cpuinfo")
	return max(1, strings.Count(string(data), "processor\t:"))
}

// goHeap is a binary's Go heap as its /metrics tells: the bytes of the
// spans in use (live objects, garbage not yet swept, and the free slots of
// spans that hold any live object: a burst's garbage leaves many) and the
// live heap the last collection marked. RSS is about the first plus the
// stacks, the runtime's own memory and the binary's pages.
type goHeap struct{ inuse, live float64 }

// goHeaps reads both binaries' Go heaps (zero for what they do not show).
func (b *bench) goHeaps(ctx context.Context) (mgr, rdr goHeap) {
	read := func(url string) goHeap {
		var h goHeap
		body, err := get(ctx, http.DefaultClient, url)
		if err != nil {
			return h
		}
		for _, line := range strings.Split(body, "\n") {
			switch {
			case strings.HasPrefix(line, "go_memstats_heap_inuse_bytes "):
				h.inuse = value(line)
			case strings.HasPrefix(line, "go_gc_heap_live_bytes "):
				h.live = value(line)
			}
		}
		return h
	}
	return read("http://" + b.mgrMetrics + "/metrics"), read("http://" + b.rdrProbe + "/metrics")
}

// heapRow is the row of a binary's Go heap per link, from before to after.
func (b *bench) heapRow(name string, before, after goHeap) {
	b.row(name+" Go heap", "in use %s KiB/link, live %s KiB/link (go_memstats_heap_inuse_bytes, go_gc_heap_live_bytes)",
		kibPerLink(after.inuse, before.inuse, b.n), kibPerLink(after.live, before.live, b.n))
}

func kibPerLink(after, before float64, n int) string {
	if after == 0 || before == 0 {
		return "?"
	}
	return fmt.Sprintf("%.2f", (after-before)/1024/float64(n))
}
