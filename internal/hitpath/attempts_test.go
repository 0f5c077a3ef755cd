package hitpath

import (
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// fakePasses measures the spans of a pass as the session would: each span
// in segments of at most chunk requests, each request 1,000 instructions
// and its index, a segment 2,002 more; disturbed(pass, from) tells which
// segments a timer ran in (5,000 instructions more, and the pass).
type fakePasses struct {
	chunk     int
	disturbed func(pass, from int) bool
	asked     [][]span
}

func (f *fakePasses) pass(n int, spans []span) ([]segment, error) {
	f.asked = append(f.asked, spans)
	var segs []segment
	for _, sp := range spans {
		for at := sp.from; at < sp.to; at += f.chunk {
			sg := segment{span: span{at, min(at+f.chunk, sp.to)}}
			sg.part = Part{Files: []string{"f"}, Ir: 2002}
			for i := sg.from; i < sg.to; i++ {
				sg.part.Ir += 1000 + int64(i)
			}
			if f.disturbed(n, at) {
				sg.part.Ir += 5000 + int64(n)
				sg.part.Disturbed, sg.part.DisturbedIr = 1, 600
			}
			segs = append(segs, sg)
		}
	}
	return segs, nil
}

func always() bool { return true }

// undisturbedIr is what the segments of u count undisturbed, as fakePasses
// counts them in segments of chunk.
func undisturbedIr(u span, chunk int) int64 {
	var ir int64
	for at := u.from; at < u.to; at += chunk {
		ir += 2002
		for i := at; i < min(at+chunk, u.to); i++ {
			ir += 1000 + int64(i)
		}
	}
	return ir
}

func sumIr(segs []segment) (ir int64) {
	for _, sg := range segs {
		ir += sg.part.Ir
	}
	return ir
}

func TestStitch(t *testing.T) {
	u := span{0, 20}
	never := func(int, int) bool { return false }
	for _, tc := range []struct {
		name        string
		disturbed   func(pass, from int) bool
		attempts    int
		undisturbed bool
		wantAsked   [][]span
		want        unitRecord
		wantExtra   int64 // instructions kept beyond the undisturbed count
		wantErr     bool
	}{
		{"undisturbed at once", never, 8, false,
			[][]span{{u}}, unitRecord{Attempts: 1}, 0, false},
		{"what a timer disturbed, measured again", func(pass, from int) bool { return pass == 1 && (from == 5 || from == 15) }, 8, false,
			[][]span{{u}, {{5, 10}, {15, 20}}}, unitRecord{Attempts: 2, Again: 10}, 0, false},
		{"again until undisturbed", func(pass, from int) bool { return from == 10 && pass < 4 }, 8, false,
			[][]span{{u}, {{10, 15}}, {{10, 15}}, {{10, 15}}}, unitRecord{Attempts: 4, Again: 15}, 0, false},
		// Disturbed in every pass: the lowest of the three kept (the pass
		// adds its number: the first).
		{"never undisturbed: the lowest kept, and counted", func(pass, from int) bool { return from == 10 }, 3, false,
			[][]span{{u}, {{10, 15}}, {{10, 15}}}, unitRecord{Attempts: 3, Again: 10, DisturbedRequests: 5, Disturbed: 1, DisturbedIr: 600}, 5001, false},
		{"undisturbed asked for: an error", func(pass, from int) bool { return from == 10 }, 2, true,
			[][]span{{u}, {{10, 15}}}, unitRecord{Attempts: 2, Again: 5, DisturbedRequests: 5, Disturbed: 1, DisturbedIr: 600}, 5001, true},
		{"one pass at least", func(pass, from int) bool { return from == 0 }, 0, false,
			[][]span{{u}}, unitRecord{Attempts: 1, DisturbedRequests: 5, Disturbed: 1, DisturbedIr: 600}, 5001, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &fakePasses{chunk: 5, disturbed: tc.disturbed}
			kept, rec, err := stitch(f.pass, u, tc.attempts, always, tc.undisturbed)
			if (err != nil) != tc.wantErr {
				t.Fatalf("error %v, want one: %v", err, tc.wantErr)
			}
			if !reflect.DeepEqual(f.asked, tc.wantAsked) {
				t.Errorf("passes asked for %v, want %v", f.asked, tc.wantAsked)
			}
			if rec != tc.want {
				t.Errorf("%+v, want %+v", rec, tc.want)
			}
			if err := covers(kept, []span{u}); err != nil {
				t.Fatal(err)
			}
			if got := sumIr(kept) - undisturbedIr(u, 5); got != tc.wantExtra {
				t.Errorf("kept %d instructions more than undisturbed, want %d", got, tc.wantExtra)
			}
		})
	}
}

// TestStitchPatience: no pass after patience runs out, whatever the
// attempts left.
func TestStitchPatience(t *testing.T) {
	f := &fakePasses{chunk: 5, disturbed: func(pass, from int) bool { return from == 0 }}
	asked := 0
	_, rec, err := stitch(f.pass, span{0, 10}, 8, func() bool { asked++; return asked < 2 }, false)
	if err != nil {
		t.Fatal(err)
	}
	if rec.Attempts != 2 || len(f.asked) != 2 || rec.DisturbedRequests != 5 {
		t.Fatalf("%+v after %d passes, want 2 passes and 5 requests kept disturbed", rec, len(f.asked))
	}
}

// TestStitchChecksThePasses: a pass that does not measure what it was
// asked is an error, not a count.
func TestStitchChecksThePasses(t *testing.T) {
	for _, tc := range []struct {
		name string
		segs []segment
	}{
		{"a gap", []segment{{span: span{0, 4}}, {span: span{5, 10}}}},
		{"short", []segment{{span: span{0, 9}}}},
		{"beyond", []segment{{span: span{0, 10}}, {span: span{10, 11}}}},
		{"across a span's end", []segment{{span: span{0, 12}}}},
		{"none", nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pass := func(int, []span) ([]segment, error) { return tc.segs, nil }
			if _, _, err := stitch(pass, span{0, 10}, 8, always, false); err == nil {
				t.Fatal("no error")
			}
		})
	}
}

func TestStitchStopsOnAnError(t *testing.T) {
	f := &fakePasses{chunk: 5, disturbed: func(pass, from int) bool { return true }}
	failing := func(n int, spans []span) ([]segment, error) {
		if n == 2 {
			return nil, errors.New("the server exited")
		}
		return f.pass(n, spans)
	}
	if _, _, err := stitch(failing, span{0, 10}, 8, always, false); err == nil || !strings.Contains(err.Error(), "exited") {
		t.Fatalf("error %v, want the second pass's", err)
	}
}

// FuzzStitch checks stitch on any pattern of disturbances and segment
// lengths: the segments kept measure every request of the unit once; a
// pass measures only what the pass before it kept disturbed; requests are
// kept disturbed only when the passes ran out, and then in the lowest
// measurement of their span.
func FuzzStitch(f *testing.F) {
	f.Add(uint8(40), uint8(5), uint8(4), []byte{1, 0, 3, 7, 1, 1, 0, 2})
	f.Add(uint8(1), uint8(1), uint8(1), []byte{1})
	f.Fuzz(func(t *testing.T, n, chunk, attempts uint8, pattern []byte) {
		u := span{0, int(n%64) + 1}
		c := int(chunk%9) + 1
		maxPasses := int(attempts%6) + 1
		disturbed := func(pass, from int) bool {
			if len(pattern) == 0 {
				return false
			}
			return pattern[(pass*31+from)%len(pattern)]%3 == 0
		}
		fp := &fakePasses{chunk: c, disturbed: disturbed}
		kept, rec, err := stitch(fp.pass, u, maxPasses, always, false)
		if err != nil {
			t.Fatal(err)
		}
		if err := covers(kept, []span{u}); err != nil {
			t.Fatal(err)
		}
		disturbedReqs := 0
		for _, sg := range kept {
			if sg.part.Disturbed > 0 {
				disturbedReqs += sg.to - sg.from
			}
		}
		if disturbedReqs != rec.DisturbedRequests {
			t.Fatalf("%d requests kept disturbed, the record says %d", disturbedReqs, rec.DisturbedRequests)
		}
		if rec.Attempts != len(fp.asked) || (disturbedReqs > 0 && rec.Attempts != maxPasses) {
			t.Fatalf("%d passes (%d asked), %d requests kept disturbed, at most %d passes", rec.Attempts, len(fp.asked), disturbedReqs, maxPasses)
		}
		for p := 1; p < len(fp.asked); p++ {
			for _, sp := range fp.asked[p] {
				if !inside(sp, fp.asked[p-1]) {
					t.Fatalf("pass %d measured %v, not asked of pass %d (%v)", p+1, sp, p, fp.asked[p-1])
				}
			}
		}
		for _, sg := range kept {
			if sg.part.Disturbed == 0 {
				continue
			}
			// The lowest of its span: the first pass that measured it (a
			// pass adds its number to a disturbed count).
			first := 0
			for p, asked := range fp.asked {
				if inside(sg.span, asked) && segmentOf(sg.span, asked, c) {
					first = p + 1
					break
				}
			}
			if want := int64(5000 + first); sg.part.Ir-undisturbedIr(sg.span, c) != want {
				t.Fatalf("kept %v counting %d more than undisturbed, want %d (pass %d's)", sg.span, sg.part.Ir-undisturbedIr(sg.span, c), want, first)
			}
		}
	})
}

// inside reports whether sp lies within one of ss.
func inside(sp span, ss []span) bool {
	for _, s := range ss {
		if s.from <= sp.from && sp.to <= s.to {
			return true
		}
	}
	return false
}

// segmentOf reports whether a pass asked for ss, in segments of chunk,
// measured sp as one of them.
func segmentOf(sp span, ss []span, chunk int) bool {
	for _, s := range ss {
		for at := s.from; at < s.to; at += chunk {
			if at == sp.from && min(at+chunk, s.to) == sp.to {
				return true
			}
		}
	}
	return false
}

// A callgrind output of one thread (the format of --dump-instr=yes
// --compress-pos=no --compress-strings=no) in which a timer ran twice and
// sysmon preempted once: three disturbances, 563 + 480 + 1200
// instructions inside them.
const disturbedOutput = `# callgrind format
version: 1
creator: callgrind-3.19.0
positions: instr
events: Ir

ob=/bin/redirector-bench
fl=./runtime/proc.go
fn=runtime.findRunnable
0x4775c0 40
cfn=runtime.(*timer).unlockAndRun
calls=2 0x477640
0x4775c9 1043
0x4775ce 1
cfn=runtime.lock2
calls=1 0x400000
0x4775d0 12
fn=runtime.schedule
0x478000 30
cfn=runtime.gopreempt_m'2
calls=1 0x479000
0x478010 1200
totals: 2326
`

func TestTotalsCountsDisturbances(t *testing.T) {
	path := filepath.Join(t.TempDir(), "out.1-01")
	if err := os.WriteFile(path, []byte(disturbedOutput), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := totals(path)
	if err != nil {
		t.Fatal(err)
	}
	if want := (threadTotals{ir: 2326, disturbed: 3, disturbedIr: 2243}); got != want {
		t.Fatalf("%+v, want %+v", got, want)
	}
	bad := strings.Replace(disturbedOutput, "0x4775c9 1043", "0x4775c9 many", 1)
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := totals(path); err == nil || !strings.Contains(err.Error(), "the cost of a call") {
		t.Fatalf("error %v, want one naming the cost of a call", err)
	}
}

func TestPickEmpty(t *testing.T) {
	p := func(ir, disturbed int64) Part { return Part{Files: []string{"f"}, Ir: ir, Disturbed: disturbed} }
	for _, tc := range []struct {
		name  string
		parts []Part
		want  int64
		v     emptyVerdict
	}{
		{"two agree", []Part{p(2002, 0), p(2002, 0)}, 2002, emptyVerdict{}},
		{"two agree across a disturbed one", []Part{p(2002, 0), p(6100, 1), p(2002, 0)}, 2002, emptyVerdict{}},
		{"the first two that agree", []Part{p(2010, 0), p(2002, 0), p(2002, 0), p(2010, 0), p(2010, 0)}, 2002, emptyVerdict{}},
		{"none agree: the lowest undisturbed", []Part{p(2010, 0), p(1990, 1), p(2002, 0), p(2006, 0)}, 2002, emptyVerdict{Unsure: true}},
		{"all disturbed: the lowest", []Part{p(6100, 1), p(5200, 1), p(8000, 2)}, 5200, emptyVerdict{Unsure: true, Disturbed: true}},
		{"none", nil, 0, emptyVerdict{Unsure: true, Disturbed: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, v := pickEmpty(tc.parts)
			if got.Ir != tc.want || v != tc.v {
				t.Fatalf("%d %+v, want %d %+v", got.Ir, v, tc.want, tc.v)
			}
		})
	}
}
