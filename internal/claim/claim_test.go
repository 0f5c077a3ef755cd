package claim

import (
	"testing"
	"time"
)

var t0 = time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC)

func at(sec int) time.Time { return t0.Add(time.Duration(sec) * time.Second) }

var hashed = []string{"c0", "c1", "c2", "c3", "c4", "c5", "c6", "c7", "c8", "c9"}

func TestPrecedes(t *testing.T) {
	tests := []struct {
		name string
		a, b Link
		want bool
	}{
		{"older wins", Link{Name: "z", Created: at(0)}, Link{Name: "a", Created: at(1)}, true},
		{"younger loses", Link{Name: "a", Created: at(1)}, Link{Name: "z", Created: at(0)}, false},
		{"same second: smaller name wins", Link{Name: "a", Created: at(0)}, Link{Name: "b", Created: at(0)}, true},
		{"same second: larger name loses", Link{Name: "b", Created: at(0)}, Link{Name: "a", Created: at(0)}, false},
		{"not before itself", Link{Name: "a", Created: at(0)}, Link{Name: "a", Created: at(0)}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Precedes(tt.a, tt.b); got != tt.want {
				t.Fatalf("Precedes = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestDecide(t *testing.T) {
	self := Link{Name: "self", Created: at(10), Target: "T"}
	tests := []struct {
		name       string
		self       Link
		candidates []string
		rivals     []Link
		want       Decision
	}{
		{
			name: "free namespace: salt 0", self: self, candidates: hashed,
			want: Decision{Outcome: Assigned, Code: "c0", Salt: 0},
		},
		{
			name: "older custom codes on salt 0 and 1: salt 2", self: self, candidates: hashed,
			rivals: []Link{
				{Name: "a", Created: at(1), Target: "A", Custom: "c0", Held: "c0", Confirmed: true},
				{Name: "b", Created: at(2), Target: "B", Custom: "c1", Held: "c1", Confirmed: true},
			},
			want: Decision{Outcome: Assigned, Code: "c2", Salt: 2},
		},
		{
			name: "same target shares the code (dedup)", self: self, candidates: hashed,
			rivals: []Link{{Name: "twin", Created: at(1), Target: "T", Held: "c0", Confirmed: true}},
			want:   Decision{Outcome: Assigned, Code: "c0", Salt: 0, Twin: "twin"},
		},
		{
			name: "duplicate joins its twin's salt 1 although salt 0 is free now", self: self, candidates: hashed,
			rivals: []Link{{Name: "twin", Created: at(1), Target: "T", Held: "c1", Confirmed: true}},
			want:   Decision{Outcome: Assigned, Code: "c1", Salt: 1, Twin: "twin"},
		},
		{
			name: "same URL, other expiry: next salt", self: self, candidates: hashed,
			rivals: []Link{{Name: "old", Created: at(1), Target: "T-other-expiry", Held: "c0", Confirmed: true}},
			want:   Decision{Outcome: Assigned, Code: "c1", Salt: 1},
		},
		{
			name: "older link declares the code before it holds it", self: self, candidates: hashed,
			rivals: []Link{{Name: "old", Created: at(1), Target: "A", Custom: "c0"}},
			want:   Decision{Outcome: Assigned, Code: "c1", Salt: 1},
		},
		{
			name: "younger holder must move first: pending", self: self, candidates: hashed,
			rivals: []Link{{Name: "young", Created: at(20), Target: "A", Held: "c0", Confirmed: true}},
			want:   Decision{Outcome: Pending, Code: "c0", Salt: 0, Rival: "young"},
		},
		{
			name: "younger declaration does not block", self: self, candidates: hashed,
			rivals: []Link{{Name: "young", Created: at(20), Target: "A", Custom: "c0"}},
			want:   Decision{Outcome: Assigned, Code: "c0", Salt: 0},
		},
		{
			name: "stability: keeps salt 2 when salt 0 frees up", candidates: hashed,
			self: Link{Name: "self", Created: at(10), Target: "T", Held: "c2", Confirmed: true},
			want: Decision{Outcome: Assigned, Code: "c2", Salt: 2},
		},
		{
			name: "held code from an old URL is not kept", candidates: hashed,
			self: Link{Name: "self", Created: at(10), Target: "T", Held: "old-url-code", Confirmed: true},
			want: Decision{Outcome: Assigned, Code: "c0", Salt: 0},
		},
		{
			name: "held code taken by an older claimant: move to the next free", candidates: hashed,
			self:   Link{Name: "self", Created: at(10), Target: "T", Held: "c0", Confirmed: true},
			rivals: []Link{{Name: "old", Created: at(1), Target: "A", Custom: "c0"}},
			want:   Decision{Outcome: Assigned, Code: "c1", Salt: 1},
		},
		{
			name: "all ten salts taken: conflict names the salt-0 blocker", self: self, candidates: hashed,
			rivals: func() []Link {
				r := make([]Link, 0, len(hashed))
				for i, c := range hashed {
					r = append(r, Link{Name: "r" + c, Created: at(i), Target: "R" + c, Held: c, Confirmed: true})
				}
				return r
			}(),
			want: Decision{Outcome: Conflict, Rival: "rc0"},
		},
		{
			name: "custom code free", candidates: []string{"docs"},
			self: Link{Name: "self", Created: at(10), Target: "T", Custom: "docs"},
			want: Decision{Outcome: Assigned, Code: "docs"},
		},
		{
			name: "custom code held by an older link: conflict", candidates: []string{"docs"},
			self:   Link{Name: "self", Created: at(10), Target: "T", Custom: "docs"},
			rivals: []Link{{Name: "old", Created: at(1), Target: "A", Custom: "docs", Held: "docs", Confirmed: true}},
			want:   Decision{Outcome: Conflict, Rival: "old"},
		},
		{
			name: "custom code, same second, smaller name wins", candidates: []string{"docs"},
			self:   Link{Name: "b", Created: at(10), Target: "T", Custom: "docs", Held: "docs", Confirmed: true},
			rivals: []Link{{Name: "a", Created: at(10), Target: "A", Custom: "docs"}},
			want:   Decision{Outcome: Conflict, Rival: "a"},
		},
		{
			name: "custom code with the same target as the holder: shared", candidates: []string{"docs"},
			self:   Link{Name: "self", Created: at(10), Target: "T", Custom: "docs"},
			rivals: []Link{{Name: "old", Created: at(1), Target: "T", Custom: "docs", Held: "docs", Confirmed: true}},
			want:   Decision{Outcome: Assigned, Code: "docs", Twin: "old"},
		},
		{
			name: "self among rivals is ignored", self: Link{Name: "self", Created: at(10), Target: "T", Held: "c0"}, candidates: hashed,
			rivals: []Link{{Name: "self", Created: at(10), Target: "other", Held: "c0"}},
			want:   Decision{Outcome: Assigned, Code: "c0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Decide(tt.self, tt.candidates, tt.rivals); got != tt.want {
				t.Fatalf("Decide = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// TestDecideKeepsEarlierCode is a changed spec (issue 54): a link whose
// confirmed code is no longer among its candidates keeps serving it while
// it cannot take a candidate, unless another link wants it.
func TestDecideKeepsEarlierCode(t *testing.T) {
	// self held "landing" and its spec.code is now "handbook".
	moved := Link{Name: "self", Created: at(10), Target: "T", Custom: "handbook", Held: "landing", Confirmed: true}
	custom := []string{"handbook"}
	tests := []struct {
		name       string
		self       Link
		candidates []string
		rivals     []Link
		want       Decision
	}{
		{
			name: "the new code is free: it moves", self: moved, candidates: custom,
			want: Decision{Outcome: Assigned, Code: "handbook"},
		},
		{
			name: "the new code is held by an older link: keeps its code", self: moved, candidates: custom,
			rivals: []Link{{Name: "guide", Created: at(1), Target: "A", Custom: "handbook", Held: "handbook", Confirmed: true}},
			want:   Decision{Outcome: Kept, Code: "landing", Rival: "guide", Wanted: "handbook"},
		},
		{
			name: "the new code is only declared by an older link: keeps its code", self: moved, candidates: custom,
			rivals: []Link{{Name: "guide", Created: at(1), Target: "A", Custom: "handbook"}},
			want:   Decision{Outcome: Kept, Code: "landing", Rival: "guide", Wanted: "handbook"},
		},
		{
			name: "the new code is held by a younger link: keeps its code while that one moves", self: moved, candidates: custom,
			rivals: []Link{{Name: "young", Created: at(20), Target: "A", Custom: "handbook", Held: "handbook", Confirmed: true}},
			want:   Decision{Outcome: Kept, Code: "landing", Rival: "young", Wanted: "handbook", Moving: true},
		},
		{
			name: "a younger declaration of the kept code does not take it", self: moved, candidates: custom,
			rivals: []Link{
				{Name: "guide", Created: at(1), Target: "A", Custom: "handbook", Held: "handbook", Confirmed: true},
				{Name: "late", Created: at(30), Target: "B", Custom: "landing"},
			},
			want: Decision{Outcome: Kept, Code: "landing", Rival: "guide", Wanted: "handbook"},
		},
		{
			name: "an older link declares the kept code: lets it go", self: moved, candidates: custom,
			rivals: []Link{
				{Name: "guide", Created: at(1), Target: "A", Custom: "handbook", Held: "handbook", Confirmed: true},
				{Name: "early", Created: at(2), Target: "B", Custom: "landing"},
			},
			want: Decision{Outcome: Conflict, Rival: "guide"},
		},
		{
			name: "a link of another target holds the kept code, even younger and pending: lets it go", self: moved, candidates: custom,
			rivals: []Link{
				{Name: "guide", Created: at(1), Target: "A", Custom: "handbook", Held: "handbook", Confirmed: true},
				{Name: "late", Created: at(30), Target: "B", Custom: "landing", Held: "landing"},
			},
			want: Decision{Outcome: Conflict, Rival: "guide"},
		},
		{
			name: "shared with a twin, only the code changed: keeps sharing it", self: moved, candidates: custom,
			rivals: []Link{
				{Name: "guide", Created: at(1), Target: "A", Custom: "handbook", Held: "handbook", Confirmed: true},
				{Name: "twin", Created: at(20), Target: "T", Custom: "landing", Held: "landing", Confirmed: true},
			},
			want: Decision{Outcome: Kept, Code: "landing", Rival: "guide", Wanted: "handbook", Twin: "twin"},
		},
		{
			name: "shared with an older twin, and the target changed: the twin keeps the code", candidates: custom,
			self: Link{Name: "self", Created: at(10), Target: "T-new", Custom: "handbook", Held: "landing", Confirmed: true},
			rivals: []Link{
				{Name: "guide", Created: at(1), Target: "A", Custom: "handbook", Held: "handbook", Confirmed: true},
				{Name: "twin", Created: at(5), Target: "T", Custom: "landing", Held: "landing", Confirmed: true},
			},
			want: Decision{Outcome: Conflict, Rival: "guide"},
		},
		{
			name: "shared with a younger twin, and the target changed: the twin keeps the code", candidates: custom,
			self: Link{Name: "self", Created: at(10), Target: "T-new", Custom: "handbook", Held: "landing", Confirmed: true},
			rivals: []Link{
				{Name: "guide", Created: at(1), Target: "A", Custom: "handbook", Held: "handbook", Confirmed: true},
				{Name: "twin", Created: at(20), Target: "T", Held: "landing", Confirmed: true},
			},
			want: Decision{Outcome: Conflict, Rival: "guide"},
		},
		{
			name: "a pending hold is not kept", candidates: custom,
			self:   Link{Name: "self", Created: at(10), Target: "T", Custom: "handbook", Held: "landing"},
			rivals: []Link{{Name: "guide", Created: at(1), Target: "A", Custom: "handbook", Held: "handbook", Confirmed: true}},
			want:   Decision{Outcome: Conflict, Rival: "guide"},
		},
		{
			name: "a hashed link with a new URL whose ten codes are held by older links: keeps its code", candidates: hashed,
			self: Link{Name: "self", Created: at(10), Target: "T-new", Held: "old", Confirmed: true},
			rivals: func() []Link {
				r := make([]Link, 0, len(hashed))
				for i, c := range hashed {
					r = append(r, Link{Name: "r" + c, Created: at(i), Target: "R" + c, Held: c, Confirmed: true})
				}
				return r
			}(),
			want: Decision{Outcome: Kept, Code: "old", Rival: "rc0", Wanted: "c0"},
		},
		{
			name: "a hashed link with a new URL whose code a younger link holds: pending on it, which is what moves that link", candidates: hashed,
			self:   Link{Name: "self", Created: at(10), Target: "T-new", Held: "old", Confirmed: true},
			rivals: []Link{{Name: "young", Created: at(20), Target: "A", Held: "c0", Confirmed: true}},
			want:   Decision{Outcome: Pending, Code: "c0", Rival: "young"},
		},
		{
			name: "custom code removed, the hashed code is free: it moves", candidates: hashed,
			self: Link{Name: "self", Created: at(10), Target: "T", Held: "landing", Confirmed: true},
			want: Decision{Outcome: Assigned, Code: "c0"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Decide(tt.self, tt.candidates, tt.rivals); got != tt.want {
				t.Fatalf("Decide = %+v, want %+v", got, tt.want)
			}
		})
	}
}

// A hand-over ends with exactly one holder whatever order the links are
// decided in: run the rule to a fixed point from every starting order.
func TestDecideConvergesToOldest(t *testing.T) {
	const n = 6
	orders := [][]int{{0, 1, 2, 3, 4, 5}, {5, 4, 3, 2, 1, 0}, {3, 0, 5, 1, 4, 2}}
	for _, order := range orders {
		links := make([]Link, n)
		for i := range links {
			// Same second for all: the name decides, and it disagrees with creation order.
			links[i] = Link{Name: string(rune('f' - i)), Created: at(0), Target: string(rune('A' + i)), Custom: "x"}
		}
		for round := 0; round < 2*n; round++ {
			for _, i := range order {
				d := Decide(links[i], []string{"x"}, links)
				switch d.Outcome {
				case Assigned, Kept:
					links[i].Held, links[i].Confirmed = d.Code, true
				case Pending:
					links[i].Held, links[i].Confirmed = d.Code, false
				case Conflict:
					links[i].Held, links[i].Confirmed = "", false
				}
			}
		}
		confirmed := 0
		for _, l := range links {
			if l.Confirmed {
				confirmed++
				if l.Name != "a" {
					t.Fatalf("order %v: %q holds x, want the oldest, %q", order, l.Name, "a")
				}
			}
		}
		if confirmed != 1 {
			t.Fatalf("order %v: %d confirmed holders, want 1", order, confirmed)
		}
	}
}

func TestWinner(t *testing.T) {
	holders := []Link{
		{Name: "young", Created: at(5), Confirmed: true},
		{Name: "pending-old", Created: at(0), Confirmed: false},
		{Name: "old", Created: at(1), Confirmed: true},
	}
	if got := Winner(holders); got != 2 {
		t.Fatalf("Winner = %d, want 2 (the oldest confirmed)", got)
	}
	if got := Winner([]Link{{Name: "p"}}); got != -1 {
		t.Fatalf("Winner of unconfirmed = %d, want -1", got)
	}
}

func TestTargetKey(t *testing.T) {
	exp := at(100)
	other := at(101)
	uses := int64(3)
	idle := time.Hour
	base := TargetKey("https://a/", &exp, nil, nil, &uses, 302, false)
	for name, k := range map[string]string{
		"expiry":         TargetKey("https://a/", &other, nil, nil, &uses, 302, false),
		"no expiry":      TargetKey("https://a/", nil, nil, nil, &uses, 302, false),
		"activation":     TargetKey("https://a/", &exp, &other, nil, &uses, 302, false),
		"idleTimeout":    TargetKey("https://a/", &exp, nil, &idle, &uses, 302, false),
		"maxUses":        TargetKey("https://a/", &exp, nil, nil, nil, 302, false),
		"redirectStatus": TargetKey("https://a/", &exp, nil, nil, &uses, 301, false),
		"forwardQuery":   TargetKey("https://a/", &exp, nil, nil, &uses, 302, true),
		"url":            TargetKey("https://b/", &exp, nil, nil, &uses, 302, false),
	} {
		if k == base {
			t.Errorf("changing %s does not change the target key", name)
		}
	}
	same := at(100)
	if TargetKey("https://a/", &same, nil, nil, &uses, 302, false) != base {
		t.Error("equal fields give different target keys")
	}
	// An activation time is not an expiry: the same instant in either field
	// gives two targets.
	if TargetKey("https://a/", &exp, nil, nil, &uses, 302, false) == TargetKey("https://a/", nil, &exp, nil, &uses, 302, false) {
		t.Error("an expiry and an activation at one instant give one target key")
	}
}

// TestDecideRivalIsStable: the Conflict's rival does not depend on the order
// of rivals (cache order), or the status message would change on each pass.
func TestDecideRivalIsStable(t *testing.T) {
	self := Link{Name: "l9", Created: at(0), Target: "t9", Custom: "taken"}
	rivals := []Link{
		{Name: "l5", Created: at(0), Target: "t5", Custom: "taken"},
		{Name: "l2", Created: at(0), Target: "t2", Custom: "taken", Held: "taken", Confirmed: true},
		{Name: "l7", Created: at(0), Target: "t7", Custom: "taken"},
	}
	for i := range rivals {
		order := append(append([]Link{}, rivals[i:]...), rivals[:i]...)
		if d := Decide(self, []string{"taken"}, order); d.Outcome != Conflict || d.Rival != "l2" {
			t.Errorf("rivals from %s first: %+v, want Conflict with l2", order[0].Name, d)
		}
	}
}
