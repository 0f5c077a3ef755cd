// Package hitpath measures the redirect hit path in instructions per
// request under valgrind's callgrind, which counts the same instructions
// for the same binary and input whatever else the machine does: the
// instrument of hack/callgrind-bench and of this package's budget test
// (TestRedirectorInstructionBudget, testdata/budget.txt).
//
// # A measurement
//
// A server (the redirector of hack/redirector-bench, the fasthttp floor of
// hack/fasthttp-floor, nginx) runs under callgrind; a client in this
// process, not under callgrind, opens Conns keep-alive connections and
// drives a fixed sequence of requests: request i asks for link i mod the
// links, on connection i mod Conns, and every answer is checked (302 and
// the link's Location, the connection kept). After a warm-up (a request
// for each link, so that every link has been used and counted once), two
// phases follow in the same process, Long requests then Short, each from a
// zero of callgrind's counters to a dump, and
//
//	instructions per request = (Ir(Long) - Ir(Short)) / (Long - Short)
//
// so that startup, the warm-up and what a phase costs whatever its length
// cancel.
//
// # Why it repeats
//
// One request is in flight at a time, and the client sends the next only
// once the server is idle: every thread blocked in a wait (epoll, futex) and
// none scheduled over a few looks at /proc. Each request then finds the
// server in the same state and takes the same path through it: the
// netpoller's wake-up, the read, the handler, the write, the read that
// finds nothing, the park. What still depends on time is kept out:
//
//   - The Go runtime's sysmon thread wakes on its own clock: its output
//     file (callgrind writes one per thread) is not counted. GODEBUG
//     schedtrace keeps it from sleeping deeply, so it looks every 10 ms
//     rather than every 20 us after each wake-up: a request or system call
//     would have to last 10 ms for it to preempt the goroutine or take the
//     processor away, and a segment in which it did is measured again (as
//     for timers, below).
//   - Timers that tick on their own (fasthttp's Date refresher every
//     second, its worker-pool cleaner every 10 seconds, the redirector's
//     connection watchdog every second) are learnt by watching the idle
//     server, and a phase is a sum of segments between them (see
//     ticks.go); a segment in which a timer ran anyway is found in its
//     profile (calls of runtime.(*timer).unlockAndRun; see disturbances)
//     and its requests are measured again (below). A segment counts the
//     same instructions beyond its requests every time (the zero
//     interrupts the server's waits; 2,002 instructions for the Go
//     servers): an empty one is measured and subtracted per segment.
//   - Go servers run with GOMAXPROCS=1 (hack/bench-redirect.sh pins them
//     to one core too), GODEBUG=asyncpreemptoff=1 (callgrind aborts on the
//     preemption signal, which is timed by the clock anyway), cpu.rdtscp=off
//     (valgrind does not know the instruction the runtime reads the clock
//     with when a thread sleeps on a contended lock: see GoEnv) and
//     GOGC=off (the hit path allocates nothing; a collection forced after
//     two minutes would land in a phase at random).
//
// # On a busy machine
//
// A phase is measured in units of the short phase's requests (whole
// read-yield cycles on every connection: the server is in the same state
// at the start of each unit) and each unit in passes (stitch): a pass sends
// all of the unit's requests, so that each request finds the server as it
// did in the first pass, and measures, after the first, only the requests
// of the segments the clock disturbed in the pass before. A unit's count is
// its undisturbed segments, from whichever pass. A busy machine makes the
// vgdb calls and the requests slow and the timers late: a segment ends
// with room for the longest recent request and dump before a tick, begins
// once the ticks due before its zero and first request are over, and a
// confirmed timer whose tick did not come when predicted is found again
// while the server is idle (ticks.refind) rather than guessed a period on.
// Requests that no pass (Options.Attempts, Options.Patience) measured
// undisturbed are kept at their lowest, and the Result counts them, their
// disturbances and the instructions inside those (Options.Undisturbed
// fails instead).
//
// What remains is the Go runtime's randomness per process: map hash seeds
// (the index's probe lengths) and which goroutine switches it samples for
// its scheduling-latency metric. Two runs of a Go server differ by up to
// about 3 instructions per request (0.03%); nginx and the fasthttp floor
// by less than one.
//
// # Where the instructions go
//
// Profile charges each instruction to the function whose code holds its
// address (the outputs are written per instruction). callgrind_annotate's
// table charges it to the function of callgrind's call-graph context
// instead, which a goroutine switch (a jump to another stack) leaves
// stale: it shows hundreds of instructions a request in functions such as
// runtime.selectgo or time.Sleep that never run per request.
//
// # The mode
//
// One request in flight is a lightly loaded server: every request pays the
// netpoller's wake-up and park, about a third of a Go server's
// instructions here. Under full load (wrk in hack/bench-redirect.sh) a Go
// server parks less often and the redirector's read yield saves a read
// system call, so the shares of the handler and of the library differ from
// those of the wall clock. Instructions are not time either: a cache miss
// costs no instruction.
package hitpath
