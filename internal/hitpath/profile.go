package hitpath

import (
	"bufio"
	"debug/elf"
	"fmt"
	"os"
	"slices"
	"sort"
	"strconv"
	"strings"
)

// Where the instructions go, by function.
//
// callgrind_annotate's table charges each instruction to the function of
// the call-graph context callgrind is in. A goroutine switch is a jump
// from one stack to another, which callgrind cannot follow: after one, it
// charges the resumed goroutine's code to the function the previous one
// parked in (runtime.selectgo, time.Sleep, runtime.main: hundreds of
// instructions a request that those functions never execute, and a
// different share each run). So the outputs are written per instruction
// (--dump-instr=yes) and each instruction is charged to the function whose
// code holds its address, from the binary's symbol table; instructions
// outside the binary (libc, the loader) keep callgrind's name.

// symbols is the function symbols of an ELF binary, by address.
type symbols struct {
	addr []uint64
	size []uint64
	name []string
}

func readSymbols(path string) (*symbols, error) {
	f, err := elf.Open(path)
	if err != nil {
		return nil, err
	}
	defer func() { _ = f.Close() }()
	syms, err := f.Symbols()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	sort.Slice(syms, func(i, j int) bool { return syms[i].Value < syms[j].Value })
	s := &symbols{}
	for _, sym := range syms {
		if elf.ST_TYPE(sym.Info) != elf.STT_FUNC || sym.Value == 0 {
			continue
		}
		s.addr = append(s.addr, sym.Value)
		s.size = append(s.size, sym.Size)
		s.name = append(s.name, sym.Name)
	}
	return s, nil
}

// lookup is the function whose code holds addr, if any.
func (s *symbols) lookup(addr uint64) (string, bool) {
	if s == nil {
		return "", false
	}
	i := sort.Search(len(s.addr), func(i int) bool { return s.addr[i] > addr }) - 1
	if i < 0 || addr >= s.addr[i]+max(s.size[i], 1) {
		return "", false
	}
	return s.name[i], true
}

// Profile is the self cost (Ir) of each function in callgrind outputs
// written with --dump-instr=yes (and --compress-pos=no,
// --compress-strings=no), charged by instruction address to the functions
// of the binary bin ("": callgrind's names throughout).
func Profile(bin string, files ...string) (map[string]int64, error) {
	return ProfileOf(bin, []string{"Ir"}, files...)
}

// ProfileOf is Profile of the sum of events (callgrind's names: Ir, D1mr,
// D1mw, ...; those the outputs do not count add nothing).
func ProfileOf(bin string, events []string, files ...string) (map[string]int64, error) {
	var syms *symbols
	if bin != "" {
		var err error
		if syms, err = readSymbols(bin); err != nil {
			return nil, err
		}
	}
	out := map[string]int64{}
	for _, path := range files {
		if err := profileFile(path, syms, events, out); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func profileFile(path string, syms *symbols, events []string, out map[string]int64) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer func() { _ = f.Close() }()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	fn := ""
	skip := false       // the line after calls= is the call's inclusive cost
	columns := []int{0} // of the events, after the address: Ir alone until an events: line says otherwise
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		switch c := line[0]; {
		case c == '0' || c == '+' || c == '-' || c == '*':
			if skip {
				skip = false
				continue
			}
			fields := strings.Fields(line)
			if len(fields) < 2 {
				continue
			}
			addr, err := strconv.ParseUint(strings.TrimPrefix(fields[0], "0x"), 16, 64)
			if err != nil {
				return fmt.Errorf("%s: %q: positions must be absolute instruction addresses", path, line)
			}
			var cost int64
			for _, c := range columns {
				if 1+c >= len(fields) {
					continue // trailing zeros are left out
				}
				v, err := strconv.ParseInt(fields[1+c], 10, 64)
				if err != nil {
					return fmt.Errorf("%s: %q: %w", path, line, err)
				}
				cost += v
			}
			name, ok := syms.lookup(addr)
			if !ok {
				name = fn
			}
			out[name] += cost
		case strings.HasPrefix(line, "events:"):
			columns = columns[:0]
			for i, e := range strings.Fields(line[len("events:"):]) {
				if slices.Contains(events, e) {
					columns = append(columns, i)
				}
			}
		case strings.HasPrefix(line, "fn="):
			fn = functionName(line[3:])
		case strings.HasPrefix(line, "calls="):
			skip = true
		}
	}
	return sc.Err()
}

// functionName is callgrind's name of a function without a recursion mark
// ("'2": its reading of a goroutine switch as a call).
func functionName(s string) string {
	if i := strings.LastIndexByte(s, '\''); i >= 0 {
		if _, err := strconv.Atoi(s[i+1:]); err == nil {
			s = s[:i]
		}
	}
	return s
}
