package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"k8s.io/client-go/rest"
)

// The API server's request counts, read from its /metrics.

type apiMetrics struct {
	requests  map[[2]string]float64 // resource, verb
	watchList float64
}

func (m apiMetrics) sum(resource, verb string) int64 {
	return int64(m.requests[[2]string{resource, verb}])
}

var writeVerbs = []string{"POST", "PUT", "PATCH", "DELETE", "APPLY", "DELETECOLLECTION"}

// writes counts writes of ShortLinks (and their status) and Events.
func (m apiMetrics) writes() int64 {
	var n int64
	for _, r := range []string{"shortlinks", "events"} {
		for _, v := range writeVerbs {
			n += m.sum(r, v)
		}
	}
	return n
}

func (m apiMetrics) writeDetail(before apiMetrics) string {
	var parts []string
	for _, r := range []string{"shortlinks", "events"} {
		for _, v := range writeVerbs {
			if d := m.sum(r, v) - before.sum(r, v); d != 0 {
				parts = append(parts, fmt.Sprintf("%s %s %d", v, r, d))
			}
		}
	}
	if len(parts) == 0 {
		return "apiserver_request_total: no PATCH/PUT/POST/DELETE of shortlinks or events"
	}
	return strings.Join(parts, ", ")
}

// floorRound creates n links in ns and writes each one's status once, by
// plain clients, then deletes them (outside the clock).

func (b *bench) requestRow(ctx context.Context, name string, before apiMetrics) error {
	now, err := b.apiMetrics(ctx)
	if err != nil {
		return err
	}
	b.row(name, "%s (each at least N/100 times)", now.requestDetail(before, max(1, int64(b.n/100))))
	return nil
}

// requestDetail lists the API requests since before, by resource and verb,
// the most frequent first, leaving out those made fewer than atLeast times (the
// control plane's own, such as leases and relists).
func (m apiMetrics) requestDetail(before apiMetrics, atLeast int64) string {
	type count struct {
		key [2]string
		n   int64
	}
	var counts []count
	for k, v := range m.requests {
		if d := int64(v - before.requests[k]); d >= atLeast {
			counts = append(counts, count{k, d})
		}
	}
	slices.SortFunc(counts, func(a, b count) int { return cmp.Compare(b.n, a.n) })
	parts := make([]string, 0, len(counts))
	for _, c := range counts {
		parts = append(parts, fmt.Sprintf("%s %s %d", c.key[1], c.key[0], c.n))
	}
	return strings.Join(parts, ", ")
}

func (b *bench) apiMetrics(ctx context.Context) (apiMetrics, error) {
	hc, err := rest.HTTPClientFor(b.cfg)
	if err != nil {
		return apiMetrics{}, err
	}
	body, err := get(ctx, hc, strings.TrimRight(b.cfg.Host, "/")+"/metrics")
	if err != nil {
		return apiMetrics{}, err
	}
	m := apiMetrics{requests: map[[2]string]float64{}}
	for _, line := range strings.Split(body, "\n") {
		switch {
		case strings.HasPrefix(line, "apiserver_request_total{"):
			m.requests[[2]string{label(line, "resource"), label(line, "verb")}] += value(line)
		case strings.HasPrefix(line, "apiserver_watch_list_duration_seconds_count{") && strings.Contains(line, `resource="shortlinks"`):
			m.watchList += value(line)
		}
	}
	return m, nil
}

func get(ctx context.Context, hc *http.Client, url string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return "", err
	}
	defer func() { _ = resp.Body.Close() }()
	data, err := io.ReadAll(resp.Body)
	if resp.StatusCode != http.StatusOK {
		return "", fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	return string(data), err
}

func label(line, name string) string {
	_, after, ok := strings.Cut(line, name+`="`)
	if !ok {
		return ""
	}
	v, _, _ := strings.Cut(after, `"`)
	return v
}

func value(line string) float64 {
	i := strings.LastIndexByte(line, ' ')
	v, _ := strconv.ParseFloat(line[i+1:], 64)
	return v
}

// Processes.
