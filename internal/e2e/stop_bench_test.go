package e2e

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

// BenchmarkStopReturnsEverything: one redirector with its default flags
// holds a reservation of each of 1,500 links (each clicked once), talking to
// the API server through a proxy that delays every byte 25 ms each way. On
// SIGTERM it must write every count and return every reservation within
// --shutdown-timeout (30s). Before releases ran in parallel it wrote one
// link at a time, two round trips each: about 600 links in 30 s, the rest
// lost as on a kill.
//
//	KUBEBUILDER_ASSETS=... go test ./internal/e2e -run '^$' -bench StopReturnsEverything -benchtime 1x -timeout 30m
func BenchmarkStopReturnsEverything(b *testing.B) {
	const n, latency = 1500, 25 * time.Millisecond
	bin, tmp, cp := newCluster(b)
	c := benchClient(b, cp)
	const ns = "stop"
	if out, err := cp.KubectlCmd(context.Background(), "create", "namespace", ns).CombinedOutput(); err != nil {
		b.Fatalf("%v: %s", err, out)
	}
	limitedLinks(c, ns, "held", n, 10, 0)
	paths := make([]string, 0, n)
	for i := range n {
		paths = append(paths, fmt.Sprintf("/%s/held%04d", ns, i))
	}
	kubeconfig := slowKubeconfig(b, cp.Kubeconfig, tmp, latency)
	rs := startRedirectors(b, cp, bin, tmp, "slow", 1, paths, "--kubeconfig", kubeconfig, "--uses-reserve-ahead=0")
	hc := &http.Client{Timeout: 10 * time.Second, CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	t0 := time.Now()
	parallel(n, 32, func(i int) error {
		resp, err := hc.Get("http://" + rs[0].addr + paths[i])
		if err != nil {
			return err
		}
		_ = resp.Body.Close()
		if resp.StatusCode != http.StatusFound {
			time.Sleep(time.Second) // 503 while the budget refills: again
			return fmt.Errorf("%s: %d", paths[i], resp.StatusCode)
		}
		return nil
	})
	b.Logf("%d links clicked once in %v", n, time.Since(t0).Round(time.Millisecond))
	start := time.Now()
	if err := rs[0].proc.Signal(syscall.SIGTERM); err != nil {
		b.Fatal(err)
	}
	select {
	case <-rs[0].proc.Done():
	case <-time.After(time.Minute):
	}
	stopped := time.Since(start)
	for b.Loop() {
	}
	var list linkv1.ShortLinkList
	if err := c.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
		b.Fatal(err)
	}
	held, wrong := 0, 0
	for _, l := range list.Items {
		if len(l.Status.UseReservations) > 0 {
			held++
		}
		if l.Status.Uses != 1 {
			wrong++
		}
	}
	b.ReportMetric(stopped.Seconds(), "s-to-exit")
	b.ReportMetric(float64(held), "links-still-reserved")
	b.ReportMetric(float64(wrong), "links-miscounted")
	if held > 0 || wrong > 0 {
		b.Errorf("after SIGTERM (%v): %d of %d links still reserved, %d miscounted", stopped, held, n, wrong)
	}
}

// slowKubeconfig writes a copy of kubeconfig whose server is a proxy to
// the real one that delays every byte by delay in each direction.
func slowKubeconfig(b *testing.B, kubeconfig, dir string, delay time.Duration) string {
	cfg, err := clientcmd.LoadFromFile(kubeconfig)
	if err != nil {
		b.Fatal(err)
	}
	for _, cl := range cfg.Clusters {
		host := cl.Server[len("https://"):]
		cl.Server = "https://" + delayProxy(b, host, delay)
	}
	path := dir + "/kubeconfig-slow"
	if err := clientcmd.WriteToFile(*cfg, path); err != nil {
		b.Fatal(err)
	}
	return path
}

// delayProxy forwards TCP connections to target, each chunk delayed by
// delay, in order; it stops with b.
func delayProxy(b *testing.B, target string, delay time.Duration) string {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = ln.Close() })
	go func() {
		for {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				_ = in.Close()
				continue
			}
			go delayCopy(out, in, delay)
			go delayCopy(in, out, delay)
		}
	}()
	return ln.Addr().String()
}

// delayCopy copies src to dst, each chunk written delay after it was read.
func delayCopy(dst, src net.Conn, delay time.Duration) {
	type chunk struct {
		at   time.Time
		data []byte
	}
	q := make(chan chunk, 1024)
	go func() {
		defer func() { _ = dst.Close() }()
		for c := range q {
			time.Sleep(time.Until(c.at))
			if _, err := dst.Write(c.data); err != nil {
				return
			}
		}
	}()
	defer close(q)
	buf := make([]byte, 32<<10)
	for {
		n, err := src.Read(buf)
		if n > 0 {
			q <- chunk{time.Now().Add(delay), append([]byte(nil), buf[:n]...)}
		}
		if err != nil {
			if err != io.EOF {
				_ = src.Close()
			}
			return
		}
	}
}
