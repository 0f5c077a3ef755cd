package hitpath

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/linkforge/linkforge/internal/images"
)

// Link is one short link of the fixed request sequence: GET /Namespace/Code
// must answer 302 with Location URL.
type Link struct{ Namespace, Code, URL string }

// ReadLinks reads a table of "namespace code url" lines (hack/redirector-bench --table).
func ReadLinks(path string) ([]Link, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var links []Link
	for line := range strings.SplitSeq(string(data), "\n") {
		if f := strings.Fields(line); len(f) == 3 {
			links = append(links, Link{f[0], f[1], f[2]})
		}
	}
	if len(links) == 0 {
		return nil, fmt.Errorf("%s: no links", path)
	}
	return links, nil
}

// Server is a server to measure: a command that serves the links on Addr.
type Server struct {
	Name string
	// Command and its arguments, run under callgrind.
	Command []string
	// Env is added to the environment (GOMAXPROCS and the like: see GoEnv).
	Env []string
	// Addr is where it answers (127.0.0.1:port).
	Addr string
	// Symbols is the binary whose symbol table names its functions by
	// address ("": callgrind's names; see Profile).
	Symbols string
	// Timers: it has timers of its own (Go servers: see ticks.go), which
	// the client learns before measuring.
	Timers bool
	// Seconds: it does some work on its first event of each new second
	// (nginx formats its cached time strings), so the client ends a
	// segment before each second begins and, between segments, sends a
	// request on a connection of its own to have that work done.
	Seconds bool
}

// GoBuild returns the command that builds the Go package pkg into out as
// the images build their binaries (cgo off, -trimpath, their tags), whatever
// the caller's environment: what is measured is what ships, and the budget
// test measures what hack/callgrind-bench does.
func GoBuild(out, pkg string) *exec.Cmd {
	cmd := exec.Command("go", "build", "-trimpath", "-tags="+images.BuildTags, "-o", out, pkg)
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOFLAGS=")
	return cmd
}

// GoEnv is the environment of a Go server under callgrind (see the package
// doc). cpu.rdtscp=off: valgrind 3.19 does not know RDTSCP, which the
// runtime reads the clock with when a thread sleeps on a contended runtime
// lock (lock2), rare but likelier on a busy machine: the server died of
// SIGILL. Without it the runtime fences and reads RDTSC; nothing on the
// hit path reads the clock so.
var GoEnv = []string{"GOMAXPROCS=1", "GODEBUG=asyncpreemptoff=1,schedtrace=2147483647,cpu.rdtscp=off", "GOGC=off"}

// Options of a measurement.
type Options struct {
	Links []Link
	// Conns is the number of keep-alive connections (default BenchConns).
	Conns int
	// Short and Long are the requests of the two phases (default
	// BenchShort, BenchLong).
	Short, Long int
	// Dir receives the callgrind outputs and the server's log.
	Dir string
	// Ready bounds the wait for the server's first 302 while it runs
	// (default 15 minutes, a backstop: startup under callgrind takes 5-20 s
	// on a quiet machine, and a busy one slows it as much as it likes; a
	// server that exits fails at once).
	Ready time.Duration
	// Debug logs every tick and segment.
	Debug bool
	// Learn is how long the idle server is watched to learn its timers
	// (default LearnAll). A timer not learnt that ticks in a measured
	// segment makes the phase be measured again.
	Learn time.Duration
	// Attempts bounds the passes over a unit of a phase (default
	// DefaultAttempts), and Patience how long the passes after the first
	// go on (default DefaultPatience). A unit is the short phase's
	// requests when the long phase is a whole number of them (each
	// connection then gets whole read-yield cycles in a unit, so that the
	// server is in the same state at the start of a unit in every pass),
	// else a whole phase. A pass sends all of the unit's requests and
	// measures, after the first, only those of the segments the clock
	// disturbed in the pass before (see stitch); what no pass measured
	// undisturbed is kept at its lowest (a disturbance only adds
	// instructions: a timer's run, a preemption), and Result says so (see
	// PhaseRecord).
	Attempts int
	Patience time.Duration
	// Undisturbed fails the measurement rather than keep a disturbed
	// phase: for a number that must be exact (a budget recorded).
	Undisturbed bool
	// Log, if set, receives progress lines.
	Log func(format string, args ...any)
	// Browser sends the requests a browser following a link from a
	// newsletter sends (BrowserQuery, BrowserHeaders) instead of the bare
	// ones: what links with rules read (hack/callgrind-bench -only
	// rules,plain measures both kinds of link with them).
	Browser bool
	// CacheSim runs callgrind's cache simulation on the caches of
	// CacheConfig, so that a Part also counts the server's data cache
	// misses: the cache lines a request reads or writes that are not in the
	// cache, which instructions do not show (with many links, a link's own
	// memory is one of those). Deterministic as instructions are; a run
	// takes about twice as long.
	CacheSim bool
}

// CacheConfig is the caches Options.CacheSim simulates, as valgrind's
// options (size, associativity, line size), fixed rather than read from the
// machine so that every machine counts the same misses: 32 KiB 8-way
// first-level caches and a 32 MiB 16-way last level, 64-byte lines (the
// AMD EPYC this was measured on).
var CacheConfig = []string{"--I1=32768,8,64", "--D1=32768,8,64", "--LL=33554432,16,64"}

// What a browser's request carries when Options.Browser: a desktop
// Chrome's User-Agent and languages, a campaign's query.
const (
	BrowserUserAgent      = "Mozilla/5.0 (Windows NT 10.0; Win64; x64) AppleWebKit/537.36 (KHTML, like Gecko) Chrome/121.0.0.0 Safari/537.36"
	BrowserAcceptLanguage = "en-US,en;q=0.9"
	BrowserQuery          = "utm_source=newsletter&utm_medium=email"
	browserHeaders        = "User-Agent: " + BrowserUserAgent + "\r\nAccept: text/html,application/xhtml+xml,application/xml;q=0.9,*/*;q=0.8\r\n" +
		"Accept-Language: " + BrowserAcceptLanguage + "\r\nAccept-Encoding: gzip, deflate, br\r\n"
)

func (o Options) withDefaults() Options {
	if o.Conns <= 0 {
		o.Conns = BenchConns
	}
	if o.Short <= 0 {
		o.Short = BenchShort
	}
	if o.Long <= o.Short {
		o.Long = max(BenchLong, o.Short+1)
	}
	if o.Ready <= 0 {
		o.Ready = 15 * time.Minute
	}
	if o.Learn <= 0 {
		o.Learn = LearnAll
	}
	if o.Attempts <= 0 {
		o.Attempts = DefaultAttempts
	}
	if o.Patience <= 0 {
		o.Patience = DefaultPatience
	}
	if o.Log == nil {
		o.Log = func(string, ...any) {}
	}
	return o
}

// Result is the measurement of one server.
type Result struct {
	Name string
	// Symbols is the binary whose symbols name the functions ("": callgrind's names).
	Symbols     string
	Short, Long int
	// ShortPart and LongPart are the callgrind outputs of the two phases,
	// each the sum of its segments.
	ShortPart, LongPart Part
	// ShortSegments and LongSegments are the segments of each phase.
	ShortSegments, LongSegments int
	// Segment is an empty segment: what each segment counts beyond its
	// requests (the zero's interruption of the server's waits).
	Segment Part
	// SegmentUnsure: no two undisturbed empty segments in a row counted
	// the same instructions, and the lowest undisturbed one was kept;
	// SegmentDisturbed: none was undisturbed, and the lowest was kept
	// (what each segment's count is less: too much by a disturbance).
	SegmentUnsure, SegmentDisturbed bool
	// LongPhase and ShortPhase are how each phase was measured: its
	// units, the passes over them, and the disturbances kept.
	LongPhase, ShortPhase PhaseRecord
	// Attempts are the passes over a unit after its first (a timer ran in
	// one of its segments).
	Attempts int
	// Disturbed is the disturbances in the phases kept (0: the count is
	// exact).
	Disturbed int64
	// Refound counts the timers' ticks that did not come when predicted
	// and were found again (see ticks.refind).
	Refound int
}

// DefaultAttempts is how many passes over a unit of a phase measure it, at
// most, and DefaultPatience how long passes after the first go on (a pass
// over 520 requests takes 5-10 s on a quiet machine, minutes on a busy
// one; a pass after the first measures only what the clock disturbed).
const (
	DefaultAttempts = 8
	DefaultPatience = 5 * time.Minute
)

// PhaseRecord is how a phase was measured.
type PhaseRecord struct {
	// Units is how many units it was measured in (see Options.Attempts),
	// Attempts how many passes over them it took in all (Units if the
	// clock disturbed none), and Again how many requests were measured
	// again in those passes.
	Units, Attempts, Again int
	// DisturbedRequests is how many of its requests were kept in segments
	// the clock disturbed (no pass measured them undisturbed), Disturbed
	// the disturbances in those segments (0: the count is exact), and
	// DisturbedIr the instructions inside their calls: a part of what
	// they added (the wake-ups around them, the goroutines they readied
	// are not in it), so at least that much of the phase's count is not
	// its requests'.
	DisturbedRequests      int
	Disturbed, DisturbedIr int64
}

// add adds a unit's record.
func (p *PhaseRecord) add(u unitRecord) {
	p.Units++
	p.Attempts += u.Attempts
	p.Again += u.Again
	p.DisturbedRequests += u.DisturbedRequests
	p.Disturbed += u.Disturbed
	p.DisturbedIr += u.DisturbedIr
}

// unitRecord is how a unit of a phase was measured.
type unitRecord struct {
	// Attempts is how many passes measured it, Again how many requests
	// the passes after the first measured.
	Attempts, Again int
	// DisturbedRequests, Disturbed and DisturbedIr: those of the
	// segments kept disturbed.
	DisturbedRequests      int
	Disturbed, DisturbedIr int64
}

// unitOf is the unit a phase of n requests is measured in: short, if n
// and long are whole numbers of it, else n.
func unitOf(n, short, long int) int {
	if short > 0 && n%short == 0 && long%short == 0 {
		return short
	}
	return n
}

// span is the requests from to to-1 of the sequence.
type span struct{ from, to int }

// segment is a measured segment: its requests, and its part.
type segment struct {
	span
	part Part
}

// stitch measures the requests of the unit u in passes: pass(n, spans)
// sends all of u's requests (so that each pass leaves the server as the
// first did: whole read-yield cycles) and measures those of spans in
// segments, which it returns. The first pass measures all of u; each next
// one measures again the segments the clock disturbed in the one before,
// as long as there are some, at most attempts passes and while patient()
// (asked before each pass after the first). The unit's count is the
// segments no disturbance touched, from whichever pass (each request
// costs the same in every pass: the server is in the same state at its
// turn), and for requests that no pass measured undisturbed, the segment
// of them that counted the fewest instructions (a disturbance only adds
// instructions), which the record counts; with undisturbed, those fail
// instead.
func stitch(pass func(n int, spans []span) ([]segment, error), u span, attempts int, patient func() bool, undisturbed bool) ([]segment, unitRecord, error) {
	var rec unitRecord
	var kept []segment
	// lowest is the disturbed segment of the fewest instructions by span.
	lowest := map[span]segment{}
	needed := []span{u}
	for n := 1; len(needed) > 0 && n <= max(attempts, 1) && (n == 1 || patient()); n++ {
		segs, err := pass(n, needed)
		if err != nil {
			return nil, rec, err
		}
		if err := covers(segs, needed); err != nil {
			return nil, rec, fmt.Errorf("pass %d: %w", n, err)
		}
		rec.Attempts = n
		if n > 1 {
			for _, sp := range needed {
				rec.Again += sp.to - sp.from
			}
		}
		needed = nil
		for _, sg := range segs {
			if sg.part.Disturbed == 0 {
				kept = append(kept, sg)
				continue
			}
			needed = append(needed, sg.span)
			if low, ok := lowest[sg.span]; !ok || sg.part.Ir < low.part.Ir {
				lowest[sg.span] = sg
			}
		}
	}
	for _, sp := range needed {
		sg := lowest[sp]
		kept = append(kept, sg)
		rec.DisturbedRequests += sp.to - sp.from
		rec.Disturbed += sg.part.Disturbed
		rec.DisturbedIr += sg.part.DisturbedIr
	}
	slices.SortFunc(kept, func(a, b segment) int { return a.from - b.from })
	if undisturbed && len(needed) > 0 {
		return kept, rec, fmt.Errorf("the clock disturbed requests %s in each of %d passes (timers, preemptions)", spans(needed), rec.Attempts)
	}
	return kept, rec, nil
}

// covers checks that segs, in order, are the requests of spans, each span
// one segment or more that follow each other.
func covers(segs []segment, spans []span) error {
	i := 0
	for _, sp := range spans {
		at := sp.from
		for at < sp.to {
			if i >= len(segs) || segs[i].from != at || segs[i].to <= at || segs[i].to > sp.to {
				return fmt.Errorf("the segments do not measure requests %d-%d", sp.from, sp.to-1)
			}
			at = segs[i].to
			i++
		}
	}
	if i != len(segs) {
		return fmt.Errorf("%d segments beyond the requests asked for", len(segs)-i)
	}
	return nil
}

// spans lists spans as requests: "3-7, 12".
func spans(ss []span) string {
	var b strings.Builder
	for i, sp := range ss {
		if i > 0 {
			b.WriteString(", ")
		}
		if sp.to-sp.from == 1 {
			fmt.Fprintf(&b, "%d", sp.from)
		} else {
			fmt.Fprintf(&b, "%d-%d", sp.from, sp.to-1)
		}
	}
	return b.String()
}

// PerRequest is the instructions per request: (Ir(Long) - Ir(Short)) /
// (Long - Short), each phase less an empty segment's instructions per
// segment.
func (r Result) PerRequest() float64 { return r.perRequest(func(p Part) int64 { return p.Ir }) }

// D1MissesPerRequest and LLMissesPerRequest are the data cache misses
// (reads and writes) per request of the first-level and the last-level
// cache, as PerRequest counts instructions (0 without Options.CacheSim).
func (r Result) D1MissesPerRequest() float64 {
	return r.perRequest(func(p Part) int64 { return p.D1Misses })
}

func (r Result) LLMissesPerRequest() float64 {
	return r.perRequest(func(p Part) int64 { return p.LLMisses })
}

func (r Result) perRequest(of func(Part) int64) float64 {
	long := of(r.LongPart) - int64(r.LongSegments)*of(r.Segment)
	short := of(r.ShortPart) - int64(r.ShortSegments)*of(r.Segment)
	return float64(long-short) / float64(r.Long-r.Short)
}

// Functions is the self cost per request of each function: the difference
// of the two phases' profiles (see Profile), each less an empty segment's
// per segment, per request.
func (r Result) Functions() (map[string]float64, error) { return r.FunctionsOf("Ir") }

// D1MissFunctions is Functions of the first-level data cache misses
// (Options.CacheSim): where a request reads memory that is not in the cache.
func (r Result) D1MissFunctions() (map[string]float64, error) { return r.FunctionsOf("D1mr", "D1mw") }

// FunctionsOf is Functions of the sum of callgrind's events.
func (r Result) FunctionsOf(events ...string) (map[string]float64, error) {
	out := map[string]float64{}
	n := float64(r.Long - r.Short)
	for _, p := range []struct {
		files []string
		k     float64
	}{
		{r.LongPart.Files, 1},
		{r.ShortPart.Files, -1},
		{r.Segment.Files, float64(r.ShortSegments - r.LongSegments)},
	} {
		fns, err := ProfileOf(r.Symbols, events, p.files...)
		if err != nil {
			return nil, err
		}
		for f, v := range fns {
			out[f] += p.k * float64(v) / n
		}
	}
	return out, nil
}

// Save writes r as <dir>/<name>.json, for Load.
func (r Result) Save(dir string) error {
	data, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, r.Name+".json"), data, 0o644)
}

// Load reads the result of server name that Save wrote in dir.
func Load(dir, name string) (Result, error) {
	var r Result
	data, err := os.ReadFile(filepath.Join(dir, name+".json"))
	if err != nil {
		return r, err
	}
	return r, json.Unmarshal(data, &r)
}

// CheckTools reports what is missing to measure: valgrind (callgrind) and vgdb.
func CheckTools() error {
	var missing []string
	for _, t := range []string{"valgrind", "vgdb"} {
		if _, err := exec.LookPath(t); err != nil {
			missing = append(missing, t)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%s not found: install valgrind (apt-get install -y valgrind)", strings.Join(missing, ", "))
	}
	return nil
}

// session is one server under callgrind and its client.
type session struct {
	o     Options
	name  string
	pid   int
	out   string // callgrind's output file (dumps are <out>.<part>-<thread>)
	part  int    // dumps so far
	c     *client
	w     *watcher
	ticks *ticks
}

// Measure runs srv under callgrind and measures its two phases.
func Measure(ctx context.Context, srv Server, o Options) (Result, error) {
	o = o.withDefaults()
	res := Result{Name: srv.Name, Symbols: srv.Symbols, Short: o.Short, Long: o.Long}
	if err := CheckTools(); err != nil {
		return res, err
	}
	if len(o.Links) == 0 {
		return res, errors.New("no links")
	}
	// A server already on the address would be measured instead.
	ln, err := net.Listen("tcp", srv.Addr)
	if err != nil {
		return res, fmt.Errorf("%s: %w", srv.Name, err)
	}
	_ = ln.Close()
	s := &session{o: o, name: srv.Name, out: filepath.Join(o.Dir, srv.Name+".callgrind")}
	logPath := filepath.Join(o.Dir, srv.Name+".log")
	logf, err := os.Create(logPath)
	if err != nil {
		return res, err
	}
	defer func() { _ = logf.Close() }()
	args := append([]string{
		"--tool=callgrind",
		"--callgrind-out-file=" + s.out,
		// A file per thread, each readable alone: the Go runtime's sysmon
		// thread is left out (see ReadPart).
		"--separate-threads=yes", "--compress-strings=no", "--compress-pos=no",
		// Costs by instruction address (see Profile).
		"--dump-instr=yes", "--dump-line=no",
	}, srv.Command...)
	if o.CacheSim {
		args = append(append([]string{"--cache-sim=yes"}, CacheConfig...), args...)
	}
	cmd := exec.Command("valgrind", args...)
	cmd.Env = append(os.Environ(), srv.Env...)
	cmd.Stdout, cmd.Stderr = logf, logf
	// Its own process group (killed whole at the end), and killed if this
	// process dies first.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return res, err
	}
	exited := make(chan struct{})
	var exitErr error
	go func() { exitErr = cmd.Wait(); close(exited) }()
	defer func() {
		// SIGKILL: no dump at exit (the phases have theirs).
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
		<-exited
	}()
	fail := func(err error) (Result, error) {
		return res, fmt.Errorf("%s: %w (its log: %s)", srv.Name, err, logPath)
	}
	s.pid = cmd.Process.Pid
	s.w = &watcher{procFiles: procFiles{pid: s.pid}}
	defer s.w.close()
	s.ticks = &ticks{w: s.w, log: s.log}
	if o.Debug {
		s.ticks.debug = s.log
	}

	s.log("starting under callgrind")
	if s.c, err = newClient(ctx, srv.Addr, o, exited, srv.Seconds); err != nil {
		select {
		case <-exited:
			return fail(fmt.Errorf("exited before serving: %v", exitErr))
		default:
		}
		return fail(err)
	}
	defer s.c.close()
	s.log("serving; warming up: a request for each of the %d links over %d connections", len(o.Links), o.Conns)
	if err := s.c.warmup(ctx, s.w); err != nil {
		return fail(err)
	}
	if srv.Timers {
		s.log("learning its timers (%s)", o.Learn)
		if err := s.ticks.learn(ctx, o.Learn); err != nil {
			return fail(err)
		}
	}
	if srv.Seconds {
		s.ticks.seconds(func(ctx context.Context) error {
			if err := s.c.poke(); err != nil {
				return err
			}
			return s.w.settle(ctx)
		})
	}
	var empty emptyVerdict
	if res.Segment, empty, err = s.emptySegment(ctx); err != nil {
		return fail(err)
	}
	res.SegmentUnsure, res.SegmentDisturbed = empty.Unsure, empty.Disturbed
	switch {
	case empty.Disturbed:
		s.log("an empty segment: %d instructions, the lowest, and disturbed: the clock disturbed every empty segment for %s (a zero and a dump take longer than the timers' period)", res.Segment.Ir, o.Patience)
	case empty.Unsure:
		s.log("an empty segment: %d instructions, the lowest: no two in a row counted the same", res.Segment.Ir)
	default:
		s.log("an empty segment: %d instructions", res.Segment.Ir)
	}
	// The long phase first: the tables of both then list the functions
	// of the short one.
	for _, ph := range []struct {
		n        int
		part     *Part
		segments *int
		rec      *PhaseRecord
	}{{o.Long, &res.LongPart, &res.LongSegments, &res.LongPhase}, {o.Short, &res.ShortPart, &res.ShortSegments, &res.ShortPhase}} {
		unit := unitOf(ph.n, o.Short, o.Long)
		var parts []Part
		for from := 0; from < ph.n; from += unit {
			u := span{from, from + unit}
			var firstPass time.Time // when the first pass ended: Patience runs from then
			segs, rec, err := stitch(func(n int, need []span) ([]segment, error) {
				if n > 1 {
					s.log("requests %d-%d of %d, pass %d (%d at most, for %s): measuring %s again", u.from, u.to-1, ph.n, n, o.Attempts, o.Patience, spans(need))
				} else {
					s.log("requests %d-%d of %d", u.from, u.to-1, ph.n)
				}
				segs, err := s.phase(ctx, u, need)
				if err != nil {
					return nil, err
				}
				if n == 1 {
					firstPass = time.Now()
				}
				if d := disturbedSegments(segs); d > 0 {
					s.log("a timer ran in %d of %d measured segments, or sysmon preempted", d, len(segs))
				}
				return segs, nil
			}, u, o.Attempts, func() bool { return time.Since(firstPass) < o.Patience }, o.Undisturbed)
			if err != nil {
				return fail(err)
			}
			for _, sg := range segs {
				parts = append(parts, sg.part)
			}
			ph.rec.add(rec)
			res.Attempts += rec.Attempts - 1
			if rec.Disturbed > 0 {
				s.log("requests %d-%d: %d of them measured undisturbed in none of %d passes; kept the lowest of each (%d disturbances, %d instructions inside them)",
					u.from, u.to-1, rec.DisturbedRequests, rec.Attempts, rec.Disturbed, rec.DisturbedIr)
			}
		}
		*ph.part, *ph.segments = sumParts(parts), len(parts)
	}
	res.Disturbed = res.LongPart.Disturbed + res.ShortPart.Disturbed
	res.Refound = s.ticks.refound
	return res, nil
}

// disturbedSegments counts the segments with a disturbance.
func disturbedSegments(segs []segment) int {
	n := 0
	for _, sg := range segs {
		if sg.part.Disturbed > 0 {
			n++
		}
	}
	return n
}

func (s *session) log(format string, args ...any) { s.o.Log(s.name+": "+format, args...) }

// zero begins a segment. A zero (and a dump) interrupts the server's
// threads in their waits, and they run a little before they wait again:
// after a zero that is counted, the same instructions every time (the
// empty segment), after a dump it is not (it is settled before the zero).
func (s *session) zero(ctx context.Context) error {
	start := time.Now()
	if err := s.control(ctx, "zero"); err != nil {
		return err
	}
	s.ticks.zeroed(time.Since(start))
	return s.w.settle(ctx)
}

// control sends callgrind a command.
func (s *session) control(ctx context.Context, command string) error {
	start := time.Now()
	err := control(ctx, s.pid, command)
	if s.o.Debug {
		s.log("vgdb %s took %s", command, time.Since(start).Round(time.Millisecond))
	}
	return err
}

// dump ends a segment.
func (s *session) dump(ctx context.Context) (Part, error) {
	start := time.Now()
	if err := s.control(ctx, "dump"); err != nil {
		return Part{}, err
	}
	s.part++
	p, err := ReadPart(s.out, s.part)
	if err != nil {
		return p, err
	}
	// When the dump took effect: when its first file was written.
	if fi, err := os.Stat(p.first); err == nil {
		s.ticks.dumped(fi.ModTime().Sub(start), time.Now())
		if s.o.Debug {
			s.log("the dump took effect after %s", fi.ModTime().Sub(start).Round(time.Millisecond))
		}
	}
	return p, s.w.settle(ctx)
}

// emptySegment measures a segment without requests until two undisturbed
// ones count the same instructions: emptyAttempts times at least,
// and on for Options.Patience (each takes a zero and a dump, which a busy
// machine makes take seconds: longer than the timers' period, and then
// most are disturbed). Then it keeps what pickEmpty keeps.
func (s *session) emptySegment(ctx context.Context) (Part, emptyVerdict, error) {
	var parts []Part
	start := time.Now()
	for n := 0; n < emptyAttempts || time.Since(start) < s.o.Patience; n++ {
		if err := s.ticks.wait(ctx); err != nil {
			return Part{}, emptyVerdict{}, err
		}
		if err := s.zero(ctx); err != nil {
			return Part{}, emptyVerdict{}, err
		}
		p, err := s.dump(ctx)
		if err != nil {
			return Part{}, emptyVerdict{}, err
		}
		parts = append(parts, p)
		if p, v := pickEmpty(parts); !v.Unsure {
			return p, v, nil
		}
	}
	p, v := pickEmpty(parts)
	return p, v, nil
}

// emptyAttempts is how many empty segments are measured at least.
const emptyAttempts = 12

// emptyVerdict says how sure an empty segment's count is.
type emptyVerdict struct {
	// Unsure: no two undisturbed ones in a row counted the same, and the
	// lowest undisturbed one was kept; Disturbed: none was undisturbed,
	// and the lowest disturbed one was kept.
	Unsure, Disturbed bool
}

// pickEmpty is the empty segment that parts (measured in turn) give: the
// first undisturbed one that counts the same as the undisturbed one before
// it (sure), else the lowest undisturbed, else the lowest disturbed.
func pickEmpty(parts []Part) (Part, emptyVerdict) {
	var lowest, lowestDisturbed, previous *Part
	for i := range parts {
		p := &parts[i]
		if p.Disturbed > 0 {
			if lowestDisturbed == nil || p.Ir < lowestDisturbed.Ir {
				lowestDisturbed = p
			}
			continue
		}
		if previous != nil && previous.Ir == p.Ir {
			return *p, emptyVerdict{}
		}
		if lowest == nil || p.Ir < lowest.Ir {
			lowest = p
		}
		previous = p
	}
	switch {
	case lowest != nil:
		return *lowest, emptyVerdict{Unsure: true}
	case lowestDisturbed != nil:
		return *lowestDisturbed, emptyVerdict{Unsure: true, Disturbed: true}
	}
	return Part{}, emptyVerdict{Unsure: true, Disturbed: true}
}

// phase sends the requests of u, one at a time, and measures those of
// spans (in u, in order) in segments around the ticks of the server's
// timers: a segment begins at a span's first request, the ticks due before
// it could end waited out, and ends at the span's end or before a tick.
// The requests outside spans are sent unmeasured (a tick may come among
// them), so that the server is in the same state at each request whatever
// is measured.
func (s *session) phase(ctx context.Context, u span, spans []span) ([]segment, error) {
	ctx, cancel := context.WithTimeoutCause(ctx, phaseTimeout,
		fmt.Errorf("%d requests took over %s: the machine is too busy, or the server's timers tick too often", u.to-u.from, phaseTimeout))
	defer cancel()
	var segs []segment
	wrap := func(err error) error {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		return err
	}
	var open *segment
	end := func(i int) error {
		p, err := s.dump(ctx)
		if err != nil {
			return err
		}
		if s.o.Debug {
			s.log("segment before request %d: %d requests, %d instructions, %d disturbances", i, open.to-open.from, p.Ir, p.Disturbed)
		}
		open.part = p
		segs = append(segs, *open)
		open = nil
		return nil
	}
	k := 0 // the span of request i, or the next one
	for i := u.from; i < u.to; i++ {
		for k < len(spans) && spans[k].to <= i {
			k++
		}
		in := k < len(spans) && spans[k].from <= i
		// A segment has a request at least, so that the phase goes on
		// however busy the machine is: a tick that fires during it is
		// found in the profile, and its requests are measured again.
		if open != nil && (!in || spans[k].from == i || s.ticks.soon()) {
			if err := end(i); err != nil {
				return nil, wrap(err)
			}
		}
		if in && open == nil {
			if err := s.ticks.wait(ctx); err != nil {
				return nil, wrap(err)
			}
			if err := s.zero(ctx); err != nil {
				return nil, wrap(err)
			}
			open = &segment{span: span{i, i}}
		}
		began := time.Now()
		if err := s.c.request(i); err != nil {
			return nil, wrap(err)
		}
		if err := s.w.settle(ctx); err != nil {
			return nil, wrap(err)
		}
		s.ticks.requested(time.Since(began))
		if open != nil {
			open.to = i + 1
		}
	}
	if open != nil {
		if err := end(u.to); err != nil {
			return nil, wrap(err)
		}
	}
	return segs, nil
}

// phaseTimeout bounds an attempt at a unit of a phase: a backstop (520
// requests take 5-10 s on a quiet machine, 4 minutes at a load average of
// 30 on two cores; each request has its own bounds: roundTrip's deadline,
// settle's minute).
const phaseTimeout = time.Hour

// control sends callgrind a command (zero, dump) through vgdb, as
// callgrind_control does, but at once: the server is idle, blocked in a
// system call, and vgdb's default waits 100 ms before it interrupts it.
func control(ctx context.Context, pid int, command string) error {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "vgdb", "--pid="+strconv.Itoa(pid), "--max-invoke-ms=1", command).CombinedOutput()
	if err != nil {
		return fmt.Errorf("vgdb %s to %d: %v: %s", command, pid, err, out)
	}
	return nil
}

// Part is one dump of a callgrind run with --separate-threads: a file per
// thread. The thread of the Go runtime's sysmon is not counted: it wakes on
// its own clock (every 20 us to 10 ms while the program works), so what it
// does depends on how long a request took, not on the request.
type Part struct {
	// Files are the outputs of the threads counted.
	Files []string
	// Ir is their instructions; Sysmon those of the sysmon thread.
	Ir, Sysmon int64
	// D1Misses and LLMisses are their data cache misses, reads and
	// writes, of the first and the last level (Options.CacheSim).
	D1Misses, LLMisses int64
	// Disturbed is how often the Go runtime did something timed by the
	// clock in the threads counted (calls of disturbances), and
	// DisturbedIr the instructions inside those calls.
	Disturbed, DisturbedIr int64
	first                  string // the first file written
}

// sumParts is the parts as one.
func sumParts(parts []Part) Part {
	var s Part
	for _, p := range parts {
		s.Files = append(s.Files, p.Files...)
		s.Ir += p.Ir
		s.D1Misses += p.D1Misses
		s.LLMisses += p.LLMisses
		s.Sysmon += p.Sysmon
		s.Disturbed += p.Disturbed
		s.DisturbedIr += p.DisturbedIr
	}
	return s
}

// ReadPart reads the dump part of the callgrind output out.
func ReadPart(out string, part int) (Part, error) {
	var p Part
	files, err := filepath.Glob(out + "." + strconv.Itoa(part) + "-*")
	if err != nil {
		return p, err
	}
	if len(files) == 0 {
		return p, fmt.Errorf("no callgrind output %s.%d-*", out, part)
	}
	p.first = files[0]
	for _, f := range files {
		t, err := totals(f)
		if err != nil {
			return p, err
		}
		if t.sysmon {
			p.Sysmon += t.ir
			continue
		}
		p.Ir += t.ir
		p.D1Misses += t.d1Misses
		p.LLMisses += t.llMisses
		p.Disturbed += t.disturbed
		p.DisturbedIr += t.disturbedIr
		p.Files = append(p.Files, f)
	}
	return p, nil
}

// disturbances are what the Go runtime does when the clock says so, not a
// request: a timer fires, sysmon has a goroutine that ran 10 ms stop
// (preemption), or takes the processor of a thread 10 ms in a system call.
// A segment in which one of them ran is measured again.
var disturbances = map[string]bool{
	"runtime.(*timer).unlockAndRun": true,
	"runtime.gopreempt_m":           true,
	"runtime.preemptPark":           true,
	"runtime.exitsyscallNoP":        true,
}

// threadTotals is what totals reads of the output of one thread.
type threadTotals struct {
	ir int64
	// d1Misses and llMisses are the data cache misses (D1mr+D1mw,
	// DLmr+DLmw), when the output has them (--cache-sim=yes).
	d1Misses, llMisses int64
	sysmon             bool  // the thread is the Go runtime's sysmon
	disturbed          int64 // calls of disturbances
	disturbedIr        int64 // the instructions inside those calls
}

// totals reads the instructions (Ir) of a callgrind output of one thread,
// whether it is the Go runtime's sysmon, and the disturbances in it.
func totals(path string) (threadTotals, error) {
	var t threadTotals
	f, err := os.Open(path)
	if err != nil {
		return t, err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	found, disturbance, inclusive := false, false, false
	var events []string
	for sc.Scan() {
		line := sc.Text()
		if inclusive {
			// The line after a disturbance's calls= is the call's
			// position and its inclusive cost, Ir first.
			inclusive = false
			if f := strings.Fields(line); len(f) >= 2 {
				n, err := strconv.ParseInt(f[1], 10, 64)
				if err != nil {
					return t, fmt.Errorf("%s: the cost of a call: %q: %w", path, line, err)
				}
				t.disturbedIr += n
			}
			continue
		}
		switch {
		case strings.HasPrefix(line, "events:"):
			events = strings.Fields(line[len("events:"):])
		case line == "fn=runtime.sysmon":
			t.sysmon = true
		case strings.HasPrefix(line, "cfn="):
			disturbance = disturbances[functionName(line[len("cfn="):])]
		case disturbance && strings.HasPrefix(line, "calls="):
			n, err := strconv.ParseInt(strings.Fields(line[len("calls="):])[0], 10, 64)
			if err != nil {
				return t, fmt.Errorf("%s: %q: %w", path, line, err)
			}
			t.disturbed += n
			inclusive = true
		}
		v, ok := strings.CutPrefix(line, "totals:")
		if !ok {
			v, ok = strings.CutPrefix(line, "summary:")
		}
		if ok && !found {
			for i, field := range strings.Fields(v) {
				event := "Ir" // the first, whatever the events line says
				if i > 0 && i < len(events) {
					event = events[i]
				} else if i > 0 {
					break
				}
				n, err := strconv.ParseInt(field, 10, 64)
				if err != nil {
					return t, fmt.Errorf("%s: %w", path, err)
				}
				switch event {
				case "Ir":
					t.ir = n
				case "D1mr", "D1mw":
					t.d1Misses += n
				case "DLmr", "DLmw":
					t.llMisses += n
				}
			}
			found = true
		}
	}
	if err := sc.Err(); err != nil {
		return t, err
	}
	if !found {
		return t, fmt.Errorf("%s: no totals", path)
	}
	return t, nil
}

// client drives the request sequence.
type client struct {
	o     Options
	addr  string
	conns []net.Conn
	rd    []*bufio.Reader
	// spare is a connection outside the sequence (Server.Seconds).
	spare   net.Conn
	spareRd *bufio.Reader
	reqs    [][]byte // by link
	want    [][]byte // Location by link
}

// newClient connects once the server accepts (a refused connection costs
// the server nothing) and until its first answer is a redirect.
func newClient(ctx context.Context, addr string, o Options, exited <-chan struct{}, spare bool) (*client, error) {
	c := &client{o: o, addr: addr}
	for _, l := range o.Links {
		if o.Browser {
			c.reqs = append(c.reqs, []byte("GET /"+l.Namespace+"/"+l.Code+"?"+BrowserQuery+" HTTP/1.1\r\nHost: "+addr+"\r\n"+browserHeaders+"\r\n"))
			c.want = append(c.want, []byte(l.URL))
			continue
		}
		c.reqs = append(c.reqs, []byte("GET /"+l.Namespace+"/"+l.Code+" HTTP/1.1\r\nHost: "+addr+
			"\r\nUser-Agent: hitpath\r\nAccept: */*\r\n\r\n"))
		c.want = append(c.want, []byte(l.URL))
	}
	deadline := time.Now().Add(o.Ready)
	for {
		select {
		case <-exited:
			return nil, errors.New("exited before serving")
		case <-ctx.Done():
			return nil, ctx.Err()
		default:
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("no redirect from %s within %s", addr, o.Ready)
		}
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		c.conns, c.rd = []net.Conn{nc}, []*bufio.Reader{bufio.NewReader(nc)}
		// Until the index is synced the redirector answers 503.
		status, _, closed, err := c.roundTrip(c.conns[0], c.rd[0], 0)
		if err == nil && status == 302 {
			break
		}
		c.close()
		if err == nil && status == 503 && !closed {
			time.Sleep(500 * time.Millisecond)
			continue
		}
		if err != nil {
			time.Sleep(100 * time.Millisecond)
			continue
		}
		return nil, fmt.Errorf("first answer: status %d", status)
	}
	n := o.Conns
	if spare {
		n++ // the last one, for pokes
	}
	for len(c.conns) < n {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			return nil, err
		}
		c.conns = append(c.conns, nc)
		c.rd = append(c.rd, bufio.NewReader(nc))
	}
	if spare {
		last := len(c.conns) - 1
		c.spare, c.spareRd = c.conns[last], c.rd[last]
		c.conns, c.rd = c.conns[:last], c.rd[:last]
	}
	return c, nil
}

// poke sends a request on the spare connection, outside the sequence.
func (c *client) poke() error {
	status, _, closed, err := c.roundTrip(c.spare, c.spareRd, 0)
	switch {
	case err != nil:
		return err
	case status != 302 || closed:
		return fmt.Errorf("poke: %d (closed: %v)", status, closed)
	}
	return nil
}

func (c *client) close() {
	for _, nc := range c.conns {
		_ = nc.Close()
	}
	if c.spare != nil {
		_ = c.spare.Close()
	}
	c.conns, c.rd, c.spare = nil, nil, nil
}

// warmup sends a request for each link, in the order of the sequence,
// each once the server is idle after the one before: every link has been
// used (counted) before the phases, and the connections are in the same
// state after it every time.
func (c *client) warmup(ctx context.Context, w *watcher) error {
	for i := range max(len(c.reqs), len(c.conns)) {
		if err := w.settle(ctx); err != nil {
			return err
		}
		if err := c.request(i); err != nil {
			return err
		}
	}
	return w.settle(ctx)
}

// request sends request i of the sequence (link i mod links, connection i
// mod conns) and checks its answer.
func (c *client) request(i int) error {
	return c.check(i%len(c.conns), i)
}

func (c *client) check(conn, i int) error {
	link := i % len(c.reqs)
	status, loc, closed, err := c.roundTrip(c.conns[conn], c.rd[conn], link)
	switch {
	case err != nil:
		return err
	case status != 302 || !bytes.Equal(loc, c.want[link]):
		return fmt.Errorf("GET /%s/%s: %d %q, want 302 %q", c.o.Links[link].Namespace, c.o.Links[link].Code, status, loc, c.want[link])
	case closed:
		return fmt.Errorf("GET /%s/%s: the server closed the connection", c.o.Links[link].Namespace, c.o.Links[link].Code)
	}
	return nil
}

// roundTrip sends the request of link on a connection and reads the
// answer: its status, Location, and whether it closes the connection.
func (c *client) roundTrip(nc net.Conn, rd *bufio.Reader, link int) (status int, location []byte, closed bool, err error) {
	if err := nc.SetDeadline(time.Now().Add(2 * time.Minute)); err != nil {
		return 0, nil, false, err
	}
	if _, err := nc.Write(c.reqs[link]); err != nil {
		return 0, nil, false, err
	}
	length := -1
	for first := true; ; first = false {
		line, err := rd.ReadSlice('\n')
		if err != nil {
			return 0, nil, false, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if first {
			f := bytes.Fields(line)
			if len(f) < 2 {
				return 0, nil, false, fmt.Errorf("bad status line %q", line)
			}
			if status, err = strconv.Atoi(string(f[1])); err != nil {
				return 0, nil, false, fmt.Errorf("bad status line %q", line)
			}
			continue
		}
		if len(line) == 0 {
			break
		}
		k, v, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		v = bytes.TrimSpace(v)
		switch strings.ToLower(string(k)) {
		case "location":
			location = bytes.Clone(v)
		case "content-length":
			if length, err = strconv.Atoi(string(v)); err != nil {
				return 0, nil, false, fmt.Errorf("bad Content-Length %q", v)
			}
		case "connection":
			closed = bytes.EqualFold(v, []byte("close"))
		}
	}
	if length < 0 {
		return 0, nil, false, errors.New("no Content-Length")
	}
	if _, err := rd.Discard(length); err != nil {
		return 0, nil, false, err
	}
	if rd.Buffered() > 0 {
		return 0, nil, false, errors.New("more bytes than the answer")
	}
	return status, location, closed, nil
}
