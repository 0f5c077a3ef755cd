// Command callgrind-bench measures the redirect hit path in instructions
// per request under callgrind (internal/hitpath): the redirector of
// hack/redirector-bench (the production handler, index and server) with
// counting uses on and off and with click events on (events: the request
// path's share, no batch sent during a measurement; events-sent: batches
// built, encoded and sent to a receiver in this process that discards them),
// the bare fasthttp floor (hack/fasthttp-floor)
// and Debian's nginx, each answering the same fixed sequence of requests
// over keep-alive connections from a client that is not under callgrind.
// It prints instructions per request, the ratios, and the functions where
// the redirector's instructions differ most from the floor's.
//
// Instruction counts do not depend on what else the machine runs: two runs
// print the same numbers to within about 3 instructions per request for
// the Go servers (their maps' random hash seeds) and one for nginx. It
// takes 3-5 minutes on a quiet machine, mostly learning each server's
// timers (10 s each) and starting them under callgrind.
//
// What the clock drives (a timer's tick, a preemption) is kept out of the
// measured segments; on a busy machine some lands in them anyway. Each
// phase is measured in units of the short phase's 520 requests (whole
// read-yield cycles: the server is in the same state at the start of
// each), in passes: a pass sends all of a unit's requests and measures,
// after the first, only those of the segments the clock disturbed in the
// pass before, up to -attempts passes (8) and for -patience (5m). What no
// pass measured undisturbed is kept at its lowest, and the table says so:
// each phase's passes over its units and the requests measured again and
// kept disturbed, a * on a number that includes disturbances, and below
// the table the instructions inside them (-undisturbed fails instead; the
// old -accept-disturbed is this default, and is gone).
//
// Usage (from the repository; make bench runs it):
//
//	go run ./hack/callgrind-bench [-only redirector,floor] [-dir DIR] [-top 15]
//
// -only rules,plain measures what routing costs: links with 8 rules and 3
// variants each against plain links, both asked by a browser's requests.
//
// -cache adds callgrind's cache simulation (hitpath.CacheConfig: the
// caches of the AMD EPYC it was written on, whatever the machine): data
// cache misses per request of the first and the last level, as
// deterministic as the instructions. With links asked for in turn, a
// link's own memory is out of the first-level cache when its next request
// comes, so the first-level misses count the cache lines a request reads
// that other requests do not keep warm: what a link costs in memory.
//
// It installs valgrind and nginx with apt-get when they are missing (as
// root). -dir keeps the callgrind outputs; DIR/<server>.json lists the
// files of each phase, and -diff DIR1,DIR2 compares two runs kept so,
// function by function.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/linkforge/linkforge/internal/hitpath"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "callgrind-bench:", err)
		os.Exit(1)
	}
}

// The servers, in the order of the report.
const (
	redirector = "redirector"
	nocount    = "nocount"
	clicks     = "events"
	clicksSent = "events-sent"
	floor      = "floor"
	nginx      = "nginx"
	// rules and plain are the redirector with links of 8 rules and 3
	// variants each, and with plain links, both asked by a browser's
	// requests (hitpath.Options.Browser): the cost of routing.
	rules = "rules"
	plain = "plain"
)

var names = []string{redirector, nocount, clicks, clicksSent, floor, nginx, rules, plain}

// flags are the command line.
type flags struct {
	redirector, floor, only, diff, dir string
	top, functions, links              int
}

func run() error {
	var f flags
	flag.StringVar(&f.redirector, "redirector", "", "hack/redirector-bench binary (built if empty)")
	flag.StringVar(&f.floor, "floor", "", "hack/fasthttp-floor binary (built if empty)")
	flag.StringVar(&f.only, "only", "", "comma-separated servers to measure (redirector,nocount,events,events-sent,floor,nginx,rules,plain); all if empty")
	flag.IntVar(&f.top, "top", 15, "functions to list where the redirector spends more than the floor")
	flag.IntVar(&f.functions, "functions", 0, "also list each server's costliest functions, this many")
	flag.StringVar(&f.diff, "diff", "", "DIR1,DIR2: compare, function by function, the runs kept in two -dir directories, and exit")
	flag.StringVar(&f.dir, "dir", "", "keep the callgrind outputs here (a temporary directory if empty)")
	began := time.Now()
	o := hitpath.Options{Log: func(format string, a ...any) {
		fmt.Fprintf(os.Stderr, "callgrind-bench: %5.1fs "+format+"\n", append([]any{time.Since(began).Seconds()}, a...)...)
	}}
	flag.IntVar(&o.Conns, "conns", hitpath.BenchConns, "keep-alive connections")
	flag.IntVar(&o.Short, "short", hitpath.BenchShort, "requests of the short phase")
	flag.IntVar(&o.Long, "long", hitpath.BenchLong, "requests of the long phase")
	flag.BoolVar(&o.Debug, "debug", false, "log every tick and segment")
	flag.BoolVar(&o.Undisturbed, "undisturbed", false,
		"fail rather than keep a phase the clock disturbed in all of its -attempts (by default the lowest is kept, and the report says so)")
	flag.IntVar(&o.Attempts, "attempts", 0, fmt.Sprintf("measurements of a unit of a phase, at most, for one the clock did not disturb (0: %d)", hitpath.DefaultAttempts))
	flag.DurationVar(&o.Patience, "patience", 0, fmt.Sprintf("how long a unit of a phase is measured again for one the clock did not disturb (0: %s)", hitpath.DefaultPatience))
	flag.BoolVar(&o.CacheSim, "cache", false, "also count data cache misses per request (callgrind's cache simulation of hitpath.CacheConfig; about twice as slow)")
	flag.IntVar(&f.links, "links", hitpath.BenchLinks, fmt.Sprintf("links (over %d namespaces)", hitpath.BenchNamespaces))
	flag.Parse()
	if o.Attempts <= 0 {
		o.Attempts = hitpath.DefaultAttempts
	}
	if o.Patience <= 0 {
		o.Patience = hitpath.DefaultPatience
	}
	if f.diff != "" {
		a, b, ok := strings.Cut(f.diff, ",")
		if !ok {
			return fmt.Errorf("-diff wants DIR1,DIR2")
		}
		return compare(a, b, f.only, max(f.top, 1))
	}

	if err := hitpath.CheckTools(); err != nil {
		o.Log("%v; installing it", err)
		if err := hitpath.Install("valgrind"); err != nil {
			return err
		}
		if err := hitpath.CheckTools(); err != nil {
			return err
		}
	}
	work, err := os.MkdirTemp("", "callgrind-bench-")
	if err != nil {
		return err
	}
	defer func() { _ = os.RemoveAll(work) }()
	o.Dir = work
	if f.dir != "" {
		if err := os.MkdirAll(f.dir, 0o755); err != nil {
			return err
		}
		o.Dir = f.dir
	}
	// The binaries are kept with the outputs: -diff reads their symbols.
	servers, rulesLinks, err := setup(&f, &o, o.Dir)
	if err != nil {
		return err
	}
	results := map[string]hitpath.Result{}
	start := time.Now()
	for _, s := range servers {
		if !want(f.only, s.Name) {
			continue
		}
		so := o
		if s.Name == rules || s.Name == plain {
			so.Browser = true
			if s.Name == rules {
				so.Links = rulesLinks
			}
		}
		r, err := hitpath.Measure(context.Background(), s, so)
		if err != nil {
			return err
		}
		results[s.Name] = r
		if err := r.Save(o.Dir); err != nil {
			return err
		}
		o.Log("%s: %.1f instructions per request (passes over the long and the short phase's units: %d, %d; disturbances kept: %d)",
			s.Name, r.PerRequest(), r.LongPhase.Attempts, r.ShortPhase.Attempts, r.Disturbed)
		if o.CacheSim {
			o.Log("%s: %.2f first-level and %.2f last-level data cache misses per request", s.Name, r.D1MissesPerRequest(), r.LLMissesPerRequest())
		}
	}
	return report(results, o, f, time.Since(start))
}

// setup builds the binaries that -redirector and -floor do not name,
// writes the links, and returns the servers and the links of the rules
// server (where a browser's request goes on each).
func setup(f *flags, o *hitpath.Options, work string) ([]hitpath.Server, []hitpath.Link, error) {
	build := func(bin *string, pkg string) error {
		if *bin != "" {
			return nil
		}
		*bin = filepath.Join(work, filepath.Base(pkg))
		cmd := hitpath.GoBuild(*bin, pkg)
		cmd.Stdout, cmd.Stderr = os.Stderr, os.Stderr
		return cmd.Run()
	}
	if err := build(&f.redirector, "github.com/linkforge/linkforge/hack/redirector-bench"); err != nil {
		return nil, nil, err
	}
	if err := build(&f.floor, "github.com/linkforge/linkforge/hack/fasthttp-floor"); err != nil {
		return nil, nil, err
	}
	table := filepath.Join(work, "links.txt")
	if out, err := exec.Command(f.redirector, hitpath.RedirectorArgs(f.links, "--table="+table)...).CombinedOutput(); err != nil {
		return nil, nil, fmt.Errorf("writing the links: %v: %s", err, out)
	}
	var err error
	if o.Links, err = hitpath.ReadLinks(table); err != nil {
		return nil, nil, err
	}
	rulesTable := filepath.Join(work, "rules-links.txt")
	if out, err := exec.Command(f.redirector, hitpath.RedirectorArgs(f.links, "--link-kind=rules", "--table="+rulesTable)...).CombinedOutput(); err != nil {
		return nil, nil, fmt.Errorf("writing the links with rules: %v: %s", err, out)
	}
	rulesLinks, err := hitpath.ReadLinks(rulesTable)
	if err != nil {
		return nil, nil, err
	}
	servers := []hitpath.Server{
		hitpath.Redirector(f.redirector, f.links, "127.0.0.1:18180", "127.0.0.1:18181", true),
		hitpath.Redirector(f.redirector, f.links, "127.0.0.1:18160", "127.0.0.1:18161", false),
		hitpath.Floor(f.floor, table, "127.0.0.1:18170"),
		hitpath.RedirectorOf(f.redirector, rules, "rules", f.links, "127.0.0.1:18200", "127.0.0.1:18201"),
		hitpath.RedirectorOf(f.redirector, plain, "plain", f.links, "127.0.0.1:18210", "127.0.0.1:18211"),
	}
	if want(f.only, clicks) || want(f.only, clicksSent) {
		sink, err := discardingReceiver()
		if err != nil {
			return nil, nil, err
		}
		servers = append(servers,
			hitpath.RedirectorEvents(f.redirector, f.links, "127.0.0.1:18150", "127.0.0.1:18151", sink),
			hitpath.RedirectorEventsSent(f.redirector, f.links, "127.0.0.1:18140", "127.0.0.1:18141", sink))
	}
	if want(f.only, nginx) {
		ng, err := hitpath.Nginx(o.Links, work, "127.0.0.1:18190")
		if err != nil {
			return nil, nil, err
		}
		servers = append(servers, ng)
	}
	return servers, rulesLinks, nil
}

// report prints the results.
func report(results map[string]hitpath.Result, o hitpath.Options, f flags, took time.Duration) error {
	fmt.Printf("instructions per request under callgrind (%s, valgrind %s): %d links, %d keep-alive connections,\n",
		goVersion(), valgrindVersion(), len(o.Links), o.Conns)
	fmt.Printf("one request in flight; (Ir of %d requests - Ir of %d) / %d; %s, %s\n",
		o.Long, o.Short, o.Long-o.Short, took.Round(time.Second), time.Now().UTC().Format("2006-01-02 15:04 UTC"))
	table(results, o)
	ratio := func(what, a, b, goal string) {
		ra, oka := results[a]
		rb, okb := results[b]
		if oka && okb {
			mark := " "
			if inexact(ra) || inexact(rb) {
				mark = "*"
			}
			fmt.Printf("  %-34s %.3fx%s %s\n", what, ra.PerRequest()/rb.PerRequest(), mark, goal)
		}
	}
	fmt.Println("ratios of instructions per request:")
	ratio("counting on / off", redirector, nocount, "(goal <= 1.03x)")
	ratio("click events on / off (hit path)", clicks, redirector, "(goal <= 1.10x)")
	ratio("click events sent / off (all)", clicksSent, redirector, "")
	ratio("redirector / fasthttp floor", redirector, floor, "(goal <= 1.10x)")
	ratio("redirector / nginx", redirector, nginx, "")
	ratio("fasthttp floor / nginx", floor, nginx, "")
	ratio("counting off / fasthttp floor", nocount, floor, "")
	ratio("8 rules, 3 variants / plain", rules, plain, "(browser requests; goal <= 1.10x)")
	if o.CacheSim {
		fmt.Printf("data cache misses per request (reads and writes; %s):\n", strings.Join(hitpath.CacheConfig, " "))
		fmt.Printf("  %-26s %9s %9s\n", "server", "D1", "LL")
		for _, name := range names {
			if r, ok := results[name]; ok {
				fmt.Printf("  %-26s %9.2f %9.2f\n", label(name), r.D1MissesPerRequest(), r.LLMissesPerRequest())
			}
		}
		if r, ok := results[rules]; ok {
			if p, ok := results[plain]; ok {
				fmt.Printf("  %-26s %+9.2f %+9.2f\n", "rules - plain", r.D1MissesPerRequest()-p.D1MissesPerRequest(), r.LLMissesPerRequest()-p.LLMissesPerRequest())
			}
		}
	}

	if r, ok := results[redirector]; ok {
		if fl, ok := results[floor]; ok && f.top > 0 {
			if err := aboveFloor(r, fl, f.top, "the redirector's", "the floor's", "redirect", "floor"); err != nil {
				return err
			}
		}
	}
	if r, ok := results[rules]; ok {
		if p, ok := results[plain]; ok && f.top > 0 {
			if err := aboveFloor(r, p, f.top, "links with rules'", "plain links'", "rules", "plain"); err != nil {
				return err
			}
			if o.CacheSim {
				rm, err := r.D1MissFunctions()
				if err != nil {
					return err
				}
				pm, err := p.D1MissFunctions()
				if err != nil {
					return err
				}
				fmt.Printf("where links with rules' first-level data cache misses per request differ from plain links' (by instruction address: the function that read or wrote the line):\n")
				listDifferences(rm, pm, f.top, "rules", "plain", "%+9.2f %9.2f %9.2f  %s\n")
			}
		}
	}
	if f.functions > 0 {
		for _, name := range names {
			if r, ok := results[name]; ok {
				if err := functions(r, f.functions); err != nil {
					return err
				}
			}
		}
	}
	if f.dir != "" {
		fmt.Printf("callgrind outputs in %s (<server>.json lists each phase's files; callgrind_annotate reads each)\n", o.Dir)
	}
	return nil
}

// table prints each server's instructions per request, how its phases
// were measured, and what the clock disturbed in those kept.
func table(results map[string]hitpath.Result, o hitpath.Options) {
	fmt.Printf("  %-26s %10s  %-28s %-28s %s\n", "server", "Ir/request", "long: passes/units, requests", "short: passes/units, requests",
		"(Ir of the long phase in segments - of the short; an empty segment)")
	var disturbed []string
	for _, name := range names {
		r, ok := results[name]
		if !ok {
			continue
		}
		mark := " "
		if inexact(r) {
			mark = "*"
			disturbed = append(disturbed, disturbance(r))
		}
		fmt.Printf("  %-26s %9.1f%s  %-28s %-28s (%d in %d - %d in %d; %d)\n", label(name), r.PerRequest(), mark,
			phaseColumn(r.LongPhase), phaseColumn(r.ShortPhase),
			r.LongPart.Ir, r.LongSegments, r.ShortPart.Ir, r.ShortSegments, r.Segment.Ir)
	}
	if len(disturbed) > 0 {
		fmt.Printf("* not exact: some requests were measured undisturbed in none of the passes over their unit (at most\n"+
			"  %d, for %s), and the lowest of their segments was kept. A disturbance (a timer's run, a preemption)\n"+
			"  adds instructions to its phase: one in the long phase reads the number high, one in the short low,\n"+
			"  by at least the instructions inside their calls (the wake-ups around them are not counted there):\n", o.Attempts, o.Patience)
		for _, d := range disturbed {
			fmt.Println("  " + d)
		}
	}
}

// inexact reports whether r includes what the clock disturbed.
func inexact(r hitpath.Result) bool { return r.Disturbed > 0 || r.SegmentUnsure || r.SegmentDisturbed }

// phaseColumn is how a phase was measured: the passes over its units, the
// requests measured again, and the requests kept disturbed if any.
func phaseColumn(p hitpath.PhaseRecord) string {
	c := fmt.Sprintf("%d/%d", p.Attempts, p.Units)
	if p.Again > 0 {
		c += fmt.Sprintf(", %d again", p.Again)
	}
	if p.Disturbed > 0 {
		c += fmt.Sprintf(", %d dist.", p.DisturbedRequests)
	}
	return c
}

// disturbance says what the disturbances kept in r may have added.
func disturbance(r hitpath.Result) string {
	n := float64(r.Long - r.Short)
	var parts []string
	for _, ph := range []struct {
		name string
		p    hitpath.PhaseRecord
		sign string
	}{{"long", r.LongPhase, "+"}, {"short", r.ShortPhase, "-"}} {
		if ph.p.Disturbed > 0 {
			parts = append(parts, fmt.Sprintf("the %s phase kept %d disturbances (in segments of %d of its requests), %d instructions inside them (%s%.1f a request at least)",
				ph.name, ph.p.Disturbed, ph.p.DisturbedRequests, ph.p.DisturbedIr, ph.sign, float64(ph.p.DisturbedIr)/n))
		}
	}
	switch {
	case r.SegmentDisturbed:
		parts = append(parts, fmt.Sprintf("the clock disturbed every empty segment: the lowest (%d, with its disturbance) was subtracted per segment, so the number reads low by a disturbance per segment of the long phase beyond the short's", r.Segment.Ir))
	case r.SegmentUnsure:
		parts = append(parts, fmt.Sprintf("no two empty segments counted the same: the lowest (%d) was subtracted", r.Segment.Ir))
	}
	return label(r.Name) + ": " + strings.Join(parts, "; ")
}

func goVersion() string {
	out, err := exec.Command("go", "env", "GOVERSION").Output()
	if err != nil {
		return "go ?"
	}
	return strings.TrimSpace(string(out))
}

func valgrindVersion() string {
	out, err := exec.Command("valgrind", "--version").Output()
	if err != nil {
		return "?"
	}
	return strings.TrimPrefix(strings.TrimSpace(string(out)), "valgrind-")
}

func want(only, name string) bool {
	if only == "" {
		return true
	}
	for n := range strings.SplitSeq(only, ",") {
		if n == name {
			return true
		}
	}
	return false
}

func label(name string) string {
	switch name {
	case nocount:
		return "redirector, counting off"
	case clicks:
		return "click events on, hit path"
	case clicksSent:
		return "click events sent"
	case floor:
		return "fasthttp floor"
	case rules:
		return "rules (8 rules, 3 variants)"
	case plain:
		return "plain (browser requests)"
	}
	return name
}

// compare lists, for each server measured in both directories, the
// functions whose cost per request differs most between the two runs.
func compare(dirA, dirB, only string, top int) error {
	for _, name := range names {
		if !want(only, name) {
			continue
		}
		a, errA := hitpath.Load(dirA, name)
		b, errB := hitpath.Load(dirB, name)
		if errA != nil || errB != nil {
			continue
		}
		fa, err := a.Functions()
		if err != nil {
			return err
		}
		fb, err := b.Functions()
		if err != nil {
			return err
		}
		type row struct {
			fn   string
			a, b float64
		}
		var rows []row
		for f, v := range fa {
			rows = append(rows, row{f, v, fb[f]})
		}
		for f, v := range fb {
			if _, ok := fa[f]; !ok {
				rows = append(rows, row{f, 0, v})
			}
		}
		abs := func(x float64) float64 { return max(x, -x) }
		sort.Slice(rows, func(i, j int) bool { return abs(rows[i].b-rows[i].a) > abs(rows[j].b-rows[j].a) })
		fmt.Printf("%s: %.1f in %s, %.1f in %s (%+.1f)\n", label(name), a.PerRequest(), dirA, b.PerRequest(), dirB, b.PerRequest()-a.PerRequest())
		fmt.Printf("  %9s %9s %9s  %s\n", "change", "first", "second", "function")
		for _, x := range rows[:min(top, len(rows))] {
			fmt.Printf("  %+9.1f %9.1f %9.1f  %s\n", x.b-x.a, x.a, x.b, x.fn)
		}
	}
	return nil
}

// functions lists the n functions of r that cost the most per request.
func functions(r hitpath.Result, n int) error {
	fns, err := r.Functions()
	if err != nil {
		return err
	}
	names := make([]string, 0, len(fns))
	for f := range fns {
		names = append(names, f)
	}
	sort.Slice(names, func(i, j int) bool { return fns[names[i]] > fns[names[j]] })
	fmt.Printf("%s: the %d costliest functions (self cost per request, of %.0f):\n", label(r.Name), n, r.PerRequest())
	for _, f := range names[:min(n, len(names))] {
		fmt.Printf("  %9.1f  %s\n", fns[f], f)
	}
	return nil
}

// aboveFloor lists the functions where r (the redirector) spends the most
// instructions per request more than f (the floor) (self cost, from
// both phases of both, by instruction address: hitpath.Profile); the
// words name them in the title and the columns.
func aboveFloor(r, f hitpath.Result, top int, rWhose, fWhose, rColumn, fColumn string) error {
	rf, err := r.Functions()
	if err != nil {
		return err
	}
	ff, err := f.Functions()
	if err != nil {
		return err
	}
	plus, minus := totals(rf, ff)
	fmt.Printf("where %s instructions per request differ from %s (self cost; %+.0f in functions that cost more, %+.0f in those that cost less):\n", rWhose, fWhose, plus, minus)
	listDifferences(rf, ff, top, rColumn, fColumn, "%+9.1f %9.1f %9.1f  %s\n")
	return nil
}

// totals are what the functions of r cost more than in f, and less.
func totals(r, f map[string]float64) (plus, minus float64) {
	for fn, v := range r {
		if d := v - f[fn]; d > 0 {
			plus += d
		} else {
			minus += d
		}
	}
	for fn, v := range f {
		if _, ok := r[fn]; !ok {
			minus -= v
		}
	}
	return plus, minus
}

// listDifferences prints the top functions by how much more they cost in
// rf than in ff, then the few that cost the most less, each row in format
// (the difference, rf's, ff's, the function).
func listDifferences(rf, ff map[string]float64, top int, rColumn, fColumn, format string) {
	type row struct {
		fn        string
		r, f, sum float64
	}
	var rows []row
	for fn, v := range rf {
		rows = append(rows, row{fn, v, ff[fn], v - ff[fn]})
	}
	for fn, v := range ff {
		if _, ok := rf[fn]; !ok {
			rows = append(rows, row{fn, 0, v, -v})
		}
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].sum > rows[j].sum })
	fmt.Printf("  %9s %9s %9s  %s\n", "extra", rColumn, fColumn, "function")
	for _, x := range rows[:min(top, len(rows))] {
		fmt.Printf("  "+format, x.sum, x.r, x.f, x.fn)
	}
	fmt.Println("  ...")
	for _, x := range rows[max(len(rows)-5, 0):] {
		if x.sum < -0.5 {
			fmt.Printf("  "+format, x.sum, x.r, x.f, x.fn)
		}
	}
}

// discardingReceiver serves, in this process (not under callgrind), a
// receiver of click events that reads each request and answers 204, and
// returns its URL.
func discardingReceiver() (string, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	srv := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		w.WriteHeader(http.StatusNoContent)
	})}
	go func() { _ = srv.Serve(ln) }()
	return "http://" + ln.Addr().String() + "/events", nil
}
