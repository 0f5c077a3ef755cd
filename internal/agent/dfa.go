package agent

import "strings"

// automaton is an Aho-Corasick automaton of tokens and notTokens, made a
// DFA over byte classes: one step per byte of the agent, whatever the
// number of tokens.
type automaton struct {
	// class maps a byte to its class: the same class for an ASCII letter
	// in either case; 0 for the bytes no token holds, none of them an
	// ASCII letter or digit (so that 0 is a word boundary).
	class [256]uint8
	// next holds a row for each state, a column for each class and a last
	// one, signalColumn, for the signals of the tokens that end at the
	// state. next[row+class] is the row (its offset) of the state after
	// reading a byte of that class: a step is an add and a load, which
	// the next step waits for, and no multiply or branch. The rows fit
	// in 16 bits; a row plus a column indexes 1<<17 entries without a
	// bounds check (those past the last row are never read).
	next         *[1 << 17]uint16
	signalColumn uint16
	// start is the row of the state that reads an agent: the state after
	// a word boundary, as if a separator came before the agent's start.
	start uint16
}

var table = newAutomaton(tokens, notTokens)

// scan is the signals of the tokens found in userAgent. They are read
// beside the chain of steps: no step waits for them.
func (m *automaton) scan(userAgent []byte) signal {
	next, class := m.next, &m.class
	signals := uint32(m.signalColumn)
	row, seen := m.start, uint16(0)
	for _, c := range userAgent {
		row = next[uint32(row)+uint32(class[c])]
		seen |= next[uint32(row)+signals]
	}
	return signal(seen)
}

// pattern is a token or notToken as the automaton reads it: a sequence of
// byte classes.
type pattern struct {
	classes []uint8
	says    signal
	not     bool // a notToken
}

func newAutomaton(tokens []token, notTokens []string) *automaton {
	m := &automaton{}
	classes := m.setClasses(tokens, notTokens)
	patterns := make([]pattern, 0, len(tokens)+len(notTokens))
	for _, t := range tokens {
		patterns = append(patterns, m.patterns(t.text, t.says, false)...)
	}
	for _, w := range notTokens {
		patterns = append(patterns, m.patterns(w, 0, true)...)
	}
	says, not, goTo := trie(patterns)
	steps, fallback := transitions(goTo, classes)
	out := outputs(says, not, fallback)
	width := classes + 1
	if len(goTo)*width > 1<<16 {
		panic("agent: too many token states for a 16-bit row")
	}
	m.next, m.signalColumn = new([1 << 17]uint16), uint16(classes)
	for s := range goTo {
		row := m.next[s*width:][:width]
		for cl := range classes {
			row[cl] = uint16(int(steps[s*classes+cl]) * width)
		}
		row[classes] = uint16(out[s])
	}
	m.start = m.next[0] // the root's step on a byte of class 0
	return m
}

// setClasses gives each byte the tokens hold a class, a letter's two cases
// the same one, and every other ASCII letter and digit a class of its own
// kind, so that class 0 holds no letter or digit.
func (m *automaton) setClasses(tokens []token, notTokens []string) (classes int) {
	classes = 1
	add := func(c byte) {
		if m.class[c] != 0 {
			return
		}
		m.class[c] = uint8(classes)
		if 'a' <= c && c <= 'z' {
			m.class[c-'a'+'A'] = uint8(classes)
		}
		classes++
	}
	words := append([]string(nil), notTokens...)
	for _, t := range tokens {
		words = append(words, strings.TrimPrefix(t.text, "^"))
	}
	for _, w := range words {
		if w == "" || w != strings.ToLower(w) || strings.Contains(w, "^") {
			panic("agent: token " + w + " is not a lower-case word")
		}
		for i := 0; i < len(w); i++ {
			add(w[i])
		}
	}
	otherLetter, otherDigit := uint8(classes), uint8(classes+1)
	classes += 2
	for c := 0; c < 256; c++ {
		switch {
		case m.class[c] != 0:
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z':
			m.class[c] = otherLetter
		case '0' <= c && c <= '9':
			m.class[c] = otherDigit
		}
	}
	return classes
}

// patterns is the patterns of a token: its classes, and for a token that
// must start a word ('^'), one pattern for each class of word boundary
// before them.
func (m *automaton) patterns(text string, says signal, not bool) []pattern {
	word := strings.HasPrefix(text, "^")
	text = strings.TrimPrefix(text, "^")
	seq := make([]uint8, len(text))
	for i := range len(text) {
		seq[i] = m.class[text[i]]
	}
	if !word {
		return []pattern{{seq, says, not}}
	}
	var out []pattern
	seen := map[uint8]bool{}
	for c := 0; c < 256; c++ {
		if cl := m.class[c]; !isWordByte(byte(c)) && !seen[cl] {
			seen[cl] = true
			out = append(out, pattern{append([]uint8{cl}, seq...), says, not})
		}
	}
	return out
}

// isWordByte reports whether c continues a word: an ASCII letter or digit.
func isWordByte(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// trie returns, for each state of the patterns' trie (state 0 the root),
// the signals of the tokens that end there, whether a notToken ends there,
// and its edges by class.
func trie(patterns []pattern) (says []signal, not []bool, goTo []map[uint8]uint16) {
	says, not, goTo = []signal{0}, []bool{false}, []map[uint8]uint16{{}}
	for _, p := range patterns {
		s := 0
		for _, cl := range p.classes {
			t, ok := goTo[s][cl]
			if !ok {
				says, not, goTo = append(says, 0), append(not, false), append(goTo, map[uint8]uint16{})
				t = uint16(len(goTo) - 1)
				goTo[s][cl] = t
			}
			s = int(t)
		}
		says[s] |= p.says
		not[s] = not[s] || p.not
	}
	return says, not, goTo
}

// transitions is the DFA: steps[state*classes+class] is the state of the
// longest suffix of (prefix + byte) that is a prefix of a pattern; and
// fallback[state] is the state of the longest proper suffix of its prefix
// that is one. Built breadth first, so that each state's fallback is
// complete before it.
func transitions(goTo []map[uint8]uint16, classes int) (steps, fallback []uint16) {
	steps = make([]uint16, len(goTo)*classes)
	fallback = make([]uint16, len(goTo))
	queue := []int{0}
	for len(queue) > 0 {
		s := queue[0]
		queue = queue[1:]
		for cl := range classes {
			t, ok := goTo[s][uint8(cl)]
			switch {
			case ok:
				steps[s*classes+cl] = t
				if s != 0 {
					fallback[t] = steps[int(fallback[s])*classes+cl]
				}
				queue = append(queue, int(t))
			case s != 0:
				steps[s*classes+cl] = steps[int(fallback[s])*classes+cl]
			}
		}
	}
	return steps, fallback
}

// outputs is, for each state, the signals of the tokens that end at it
// (its suffixes on the fallback chain), less those of tokens that end a
// notToken ending there.
func outputs(says []signal, not []bool, fallback []uint16) []signal {
	chain := func(s int, visit func(int)) {
		for ; s != 0; s = int(fallback[s]) {
			visit(s)
		}
	}
	out := make([]signal, len(says))
	for s := range says {
		inside := map[int]bool{}
		chain(s, func(t int) {
			if not[t] {
				chain(t, func(u int) { inside[u] = true })
			}
		})
		chain(s, func(t int) {
			if !inside[t] {
				out[s] |= says[t]
			}
		})
	}
	return out
}
