package symbolize

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"testing"
)

func TestParsePerfMapLine(t *testing.T) {
	tests := []struct {
		line string
		want JITSymbol
		bad  bool
	}{
		{line: "7f71fc0067c0 688 JS:*buildLedger /path/app.js:4:21", want: JITSymbol{0x7f71fc0067c0, 0x688, "JS:*buildLedger /path/app.js:4:21"}},
		{line: "0x7f00 0x10 Interpreter", want: JITSymbol{0x7f00, 0x10, "Interpreter"}},
		{line: "7f00 10 Alloc::keep(int)\r\n", want: JITSymbol{0x7f00, 0x10, "Alloc::keep(int)"}},
		{line: "7f00 10  leading space kept", want: JITSymbol{0x7f00, 0x10, " leading space kept"}},
		{line: "7f00 10", bad: true},              // no name
		{line: "7f00 10 ", bad: true},             // empty name
		{line: "7f00 0 zero", bad: true},          // empty range
		{line: "zz 10 x", bad: true},              // not hex
		{line: "ffffffffffffffff 2 x", bad: true}, // wraps around
		{line: "7f00 10 a\x00b", bad: true},       // NUL in the name
		{line: "", bad: true},
	}
	for _, tt := range tests {
		got, err := ParsePerfMapLine([]byte(tt.line))
		if tt.bad {
			if !errors.Is(err, ErrPerfMapLine) {
				t.Errorf("%q: err %v, want ErrPerfMapLine", tt.line, err)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%q: %+v, %v; want %+v", tt.line, got, err, tt.want)
		}
	}
	long := bytes.Repeat([]byte{'x'}, 3000)
	got, err := ParsePerfMapLine(append([]byte("10 10 "), long...))
	if err != nil || len(got.Name) != maxJITName {
		t.Errorf("a %d-byte name: %d bytes kept, %v; want %d", len(long), len(got.Name), err, maxJITName)
	}
}

// ParsePerfMap parses complete lines only: a line still being written is
// read once its newline is there.
func TestParsePerfMapIncremental(t *testing.T) {
	tests := []struct {
		data string
		want []JITSymbol
		used int
		bad  int
	}{
		{"", nil, 0, 0},
		{"10 4 a\n20 4 b c\n", []JITSymbol{{0x10, 4, "a"}, {0x20, 4, "b c"}}, 16, 0},
		{"10 4 a\n20 4 b", []JITSymbol{{0x10, 4, "a"}}, 7, 0},
		{"10 4 a\n\njunk\n30 1 d\n", []JITSymbol{{0x10, 4, "a"}, {0x30, 1, "d"}}, 20, 1},
	}
	for _, tt := range tests {
		got, used, bad, err := ParsePerfMap([]byte(tt.data))
		if err != nil || !reflect.DeepEqual(got, tt.want) || used != tt.used || bad != tt.bad {
			t.Errorf("%q: %+v used %d bad %d err %v; want %+v used %d bad %d", tt.data, got, used, bad, err, tt.want, tt.used, tt.bad)
		}
	}
	if _, _, _, err := ParsePerfMap(bytes.Repeat([]byte{'1'}, maxPerfMapLine+1)); err == nil {
		t.Error("a line longer than the bound: no error")
	}
}

// jitdumpFile builds a jitdump in order with a header and records.
func jitdumpFile(order binary.ByteOrder, recs ...[]byte) []byte {
	var b bytes.Buffer
	h := make([]byte, jitdumpHeaderSize)
	order.PutUint32(h[0:], jitdumpMagic)
	order.PutUint32(h[4:], 1)
	order.PutUint32(h[8:], jitdumpHeaderSize)
	order.PutUint32(h[12:], 62) // EM_X86_64
	order.PutUint32(h[20:], 1234)
	b.Write(h)
	for _, r := range recs {
		b.Write(r)
	}
	return b.Bytes()
}

// codeLoadRecord is a JIT_CODE_LOAD record naming size bytes at addr.
func codeLoadRecord(order binary.ByteOrder, addr, size uint64, name string) []byte {
	body := make([]byte, jitCodeLoadFixed)
	order.PutUint32(body[0:], 1234)
	order.PutUint32(body[4:], 1235)
	order.PutUint64(body[8:], addr)
	order.PutUint64(body[16:], addr)
	order.PutUint64(body[24:], size)
	body = append(body, name...)
	body = append(body, 0)
	body = append(body, make([]byte, size)...) // the code
	return record(order, jitCodeLoad, body)
}

func record(order binary.ByteOrder, id uint32, body []byte) []byte {
	h := make([]byte, jitRecordHeader)
	order.PutUint32(h[0:], id)
	order.PutUint32(h[4:], uint32(jitRecordHeader+len(body)))
	return append(h, body...)
}

func TestJITDump(t *testing.T) {
	le, be := binary.LittleEndian, binary.BigEndian
	loadA := codeLoadRecord(le, 0x7f0000001000, 0x40, "JS:*packFrames /app.js:8:20")
	other := record(le, 3, nil) // JIT_CODE_CLOSE: no name
	loadB := codeLoadRecord(le, 0x7f0000002000, 0x10, "stub")
	tests := []struct {
		name string
		file []byte
		want []JITSymbol
		bad  bool
	}{
		{"empty", nil, nil, false},
		{"header only", jitdumpFile(le), nil, false},
		{"two loads", jitdumpFile(le, loadA, other, loadB),
			[]JITSymbol{{0x7f0000001000, 0x40, "JS:*packFrames /app.js:8:20"}, {0x7f0000002000, 0x10, "stub"}}, false},
		{"big-endian", jitdumpFile(be, codeLoadRecord(be, 0x1000, 8, "x")), []JITSymbol{{0x1000, 8, "x"}}, false},
		{"record cut short", jitdumpFile(le, loadA, loadB[:20]), []JITSymbol{{0x7f0000001000, 0x40, "JS:*packFrames /app.js:8:20"}}, false},
		{"bad magic", append([]byte("ELF\x00"), make([]byte, 60)...), nil, true},
		{"record size under its header", jitdumpFile(le, []byte{0, 0, 0, 0, 8, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0}), nil, true},
	}
	for _, tt := range tests {
		var d JITDump
		got, err := d.Next(bytes.NewReader(tt.file), int64(len(tt.file)))
		if (err != nil) != tt.bad || (err != nil && !errors.Is(err, ErrJITDump)) {
			t.Errorf("%s: err %v, want error %v", tt.name, err, tt.bad)
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: %+v, want %+v", tt.name, got, tt.want)
		}
	}
	// Read as it grows: a record is read once complete, never twice.
	file := jitdumpFile(le, loadA, loadB)
	var d JITDump
	cut := len(file) - len(loadB)/2
	first, err := d.Next(bytes.NewReader(file), int64(cut))
	if err != nil || len(first) != 1 {
		t.Fatalf("first read: %+v, %v", first, err)
	}
	second, err := d.Next(bytes.NewReader(file), int64(len(file)))
	if err != nil || !reflect.DeepEqual(second, []JITSymbol{{0x7f0000002000, 0x10, "stub"}}) {
		t.Errorf("second read: %+v, %v", second, err)
	}
}

// The newest symbol covering an address names it: a runtime reuses the
// code space its collector freed.
func TestJITTableNewestWins(t *testing.T) {
	var tab jitTable
	tab.add([]JITSymbol{{0x1000, 0x100, "old"}, {0x2000, 0x10, "other"}, {0x800, 0x1000, "wide"}}, "m")
	tab.add([]JITSymbol{{0x1040, 0x20, "new"}}, "m")
	tests := []struct {
		pc   uint64
		want string
	}{
		{0x7ff, ""}, {0x800, "wide"}, {0x1000, "wide"}, {0x103f, "wide"}, {0x1040, "new"}, {0x105f, "new"},
		{0x1060, "wide"}, {0x17ff, "wide"}, {0x1800, ""}, {0x2000, "other"}, {0x2010, ""},
	}
	for _, tt := range tests {
		e, ok := tab.lookup(tt.pc)
		if e.name != tt.want || ok != (tt.want != "") {
			t.Errorf("lookup(%#x) = %q, %v; want %q", tt.pc, e.name, ok, tt.want)
		}
	}
}

// The flattened table answers as a scan of every symbol would: the
// newest covering symbol, checked on random overlapping maps, with recent
// symbols apart and all flattened together.
func TestJITTableAgreesWithScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := 0; round < 50; round++ {
		var tab jitTable
		var all []JITSymbol
		for batch := 0; batch < 3; batch++ {
			var syms []JITSymbol
			n := 20
			if round%10 == 9 {
				n = jitRecent/2 + 1 // past jitRecent: everything flattened again
			}
			for i := 0; i < n; i++ {
				syms = append(syms, JITSymbol{Start: rng.Uint64N(200), Size: 1 + rng.Uint64N(40), Name: fmt.Sprint(len(all) + len(syms))})
			}
			tab.add(syms, "m")
			all = append(all, syms...)
		}
		for pc := uint64(0); pc < 260; pc++ {
			want := ""
			for _, s := range all {
				if pc >= s.Start && pc < s.Start+s.Size {
					want = s.Name // the last read wins
				}
			}
			e, ok := tab.lookup(pc)
			if e.name != want || ok != (want != "") {
				t.Fatalf("round %d: lookup(%d) = %q, %v; want %q", round, pc, e.name, ok, want)
			}
		}
	}
}

// A map written anew with the same lines (the JVM's, at each request)
// adds nothing: the table does not grow with the requests.
func TestJITTableRewrite(t *testing.T) {
	var tab jitTable
	lines := []JITSymbol{{0x1000, 0x100, "a"}, {0x2000, 0x10, "b"}}
	tab.add(lines, "m")
	tab.add([]JITSymbol{{0x1000, 0x10, "over a"}}, "m")
	tab.add(lines, "m") // "a" wins its start back; "b" is already there
	tab.add(lines, "m")
	if len(tab.syms) != 4 {
		t.Errorf("%d symbols after rewrites, want 4: %+v", len(tab.syms), tab.syms)
	}
	for pc, want := range map[uint64]string{0x1000: "a", 0x1050: "a", 0x2000: "b"} {
		if e, _ := tab.lookup(pc); e.name != want {
			t.Errorf("lookup(%#x) = %q, want %q", pc, e.name, want)
		}
	}
}

// TestRecordedJIT: an offline resolver names JIT code by recorded symbols
// (the newest covering an address wins) and hands back what it was given.
func TestRecordedJIT(t *testing.T) {
	syms := []RecordedJIT{
		{Start: 0x7000, Size: 0x100, Name: "JS:*old a.js:1:1", File: "/tmp/perf-9.map"},
		{Start: 0x7000, Size: 0x40, Name: "JS:*new a.js:2:1", File: "/tmp/perf-9.map"},
		{Start: 0x7200, Size: 0x20, Name: "dumped", File: "/tmp/jit-9.dump"},
	}
	r := NewResolver()
	r.Offline()
	r.AddJITSymbols(9, syms)
	for _, c := range []struct {
		ret        uint64
		fn, module string
	}{
		{0x7011, "JS:*new a.js:2:1", "/tmp/perf-9.map"},
		{0x7081, "JS:*old a.js:1:1", "/tmp/perf-9.map"},
		{0x7211, "dumped", "/tmp/jit-9.dump"},
		{0x7301, "", ""},
	} {
		f := r.Resolve(9, c.ret)
		if f.Function != c.fn || f.Module != c.module {
			t.Errorf("Resolve(%#x) = %q in %q, want %q in %q", c.ret, f.Function, f.Module, c.fn, c.module)
		}
	}
	got, next := r.JITSymbolsFrom(9, 1)
	if !slices.Equal(got, syms[1:]) || next != 3 {
		t.Errorf("JITSymbolsFrom(9, 1) = %+v, %d; want %+v, 3", got, next, syms[1:])
	}
}
