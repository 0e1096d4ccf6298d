package unwind

import (
	"bufio"
	"debug/elf"
	"encoding/binary"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// A user-space model of the BPF stack walker, run on a real stack: the
// stack.c fixture writes its registers and stack from inside a signal
// handler, and the walk must find the whole call chain through the tables
// alone. This pins down what the rows mean at run time (return address
// minus one, the signal frame, the DRAP frame, the end of the stack).

// snapshot is a process's stack as stack.c wrote it.
type snapshot struct {
	pc, rsp, rbp uint64
	base         uint64 // address of stack[0] (the captured rsp)
	stack        []byte
	maps         []mapping
}

type mapping struct {
	start, end, offset uint64
	path               string
}

func readSnapshot(t *testing.T, file string) *snapshot {
	t.Helper()
	b, err := os.ReadFile(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) < 32 {
		t.Fatalf("snapshot of %d bytes", len(b))
	}
	le := binary.LittleEndian
	s := &snapshot{pc: le.Uint64(b), rsp: le.Uint64(b[8:]), rbp: le.Uint64(b[16:]), stack: b[32:]}
	s.base = s.rsp
	if end := le.Uint64(b[24:]); end-s.base != uint64(len(s.stack)) {
		t.Fatalf("stack %#x..%#x but %d bytes", s.base, end, len(s.stack))
	}
	f, err := os.Open(file + ".maps")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s.maps = parseMaps(f)
	return s
}

// parseMaps reads /proc/PID/maps, keeping the file mappings.
func parseMaps(r io.Reader) []mapping {
	var maps []mapping
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		// 7f..-7f.. r-xp 00026000 fe:01 1234   /usr/lib/x86_64-linux-gnu/libc.so.6
		fields := strings.Fields(sc.Text())
		if len(fields) < 6 || !strings.HasPrefix(fields[5], "/") {
			continue
		}
		lo, hi, _ := strings.Cut(fields[0], "-")
		m := mapping{path: fields[5]}
		m.start, _ = strconv.ParseUint(lo, 16, 64)
		m.end, _ = strconv.ParseUint(hi, 16, 64)
		m.offset, _ = strconv.ParseUint(fields[2], 16, 64)
		maps = append(maps, m)
	}
	return maps
}

// read8 reads the stack; ok is false outside the captured range.
func (s *snapshot) read8(addr uint64) (uint64, bool) {
	if addr < s.base || addr+8 > s.base+uint64(len(s.stack)) {
		return 0, false
	}
	return binary.LittleEndian.Uint64(s.stack[addr-s.base:]), true
}

// module is one mapped ELF file: its table and symbols.
type module struct {
	path  string
	table *Table
	loads []elf.ProgHeader
	syms  []elf.Symbol // functions, sorted by address
}

// frame is one step of the walk.
type frame struct {
	pc     uint64 // run-time address
	module string
	vaddr  uint64 // file-relative
	fn     string
	kind   Kind
	rowPC  uint64 // start of the row used
}

func (f frame) String() string {
	return fmt.Sprintf("%s!%s+%#x(%s)", filepath.Base(f.module), f.fn, f.vaddr, f.kind)
}

type walker struct {
	t       *testing.T
	s       *snapshot
	cache   *Cache
	modules map[string]*module
}

func (w *walker) module(path string) *module {
	if m, ok := w.modules[path]; ok {
		return m
	}
	tab, err := w.cache.Table(path)
	if err != nil {
		w.t.Fatal(err)
	}
	f := openELF(w.t, path)
	m := &module{path: path, table: tab}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			m.loads = append(m.loads, p.ProgHeader)
		}
	}
	syms, _ := f.Symbols()
	dyn, _ := f.DynamicSymbols()
	for _, s := range append(syms, dyn...) {
		if elf.ST_TYPE(s.Info) == elf.STT_FUNC && s.Value != 0 {
			m.syms = append(m.syms, s)
		}
	}
	sort.Slice(m.syms, func(i, j int) bool { return m.syms[i].Value < m.syms[j].Value })
	w.modules[path] = m
	return m
}

// locate maps a run-time address to its module and file-relative address
// (the p_vaddr space the tables use).
func (w *walker) locate(pc uint64) (*module, uint64, bool) {
	for _, mp := range w.s.maps {
		if pc < mp.start || pc >= mp.end {
			continue
		}
		m := w.module(mp.path)
		off := pc - mp.start + mp.offset
		for _, p := range m.loads {
			if off >= p.Off && off < p.Off+p.Filesz {
				return m, off - p.Off + p.Vaddr, true
			}
		}
	}
	return nil, 0, false
}

func (m *module) function(vaddr uint64) string {
	i := sort.Search(len(m.syms), func(i int) bool { return m.syms[i].Value > vaddr })
	for i--; i >= 0; i-- {
		s := m.syms[i]
		if vaddr < s.Value+max(s.Size, 1) {
			return s.Name
		}
		if s.Size != 0 {
			break
		}
	}
	return "?"
}

// walk unwinds the snapshot. complete is true when the walk ended at a
// KindEnd row; false when a row was missing or KindUndefined.
func (w *walker) walk() (frames []frame, complete bool) {
	pc, rsp, rbp := w.s.pc, w.s.rsp, w.s.rbp
	exact := true // the leaf PC, and a PC interrupted by a signal, are not return addresses
	for len(frames) < 64 {
		m, vaddr, ok := w.locate(pc)
		if !ok {
			// Not in a file: the vDSO, JIT code, a uretprobe trampoline.
			return append(frames, frame{pc: pc, fn: "?"}), false
		}
		// A return address points after the call: look up the call itself.
		lookup := vaddr
		if !exact {
			lookup--
		}
		row, ok := m.table.Lookup(lookup)
		fr := frame{pc: pc, module: m.path, vaddr: vaddr, fn: m.function(lookup), kind: row.Kind, rowPC: row.PC}
		frames = append(frames, fr)
		if !ok {
			return frames, false
		}
		var cfa uint64
		switch row.Kind {
		case KindRSP:
			cfa = rsp + uint64(int64(row.CFAOffset))
		case KindRBP:
			cfa = rbp + uint64(int64(row.CFAOffset))
		case KindPLT:
			// rip & 15 of the run-time PC equals that of the file address:
			// mappings are page aligned.
			cfa = rsp + 8
			if int32(vaddr&15) >= row.CFAOffset {
				cfa += 8
			}
		case KindDerefRBP:
			if cfa, ok = w.s.read8(rbp + uint64(int64(row.CFAOffset))); !ok {
				return frames, false
			}
		case KindSignal:
			var r1, r2, r3 bool
			rbp, r1 = w.s.read8(rsp + SignalRBPOffset)
			pc, r2 = w.s.read8(rsp + SignalRIPOffset)
			rsp, r3 = w.s.read8(rsp + SignalRSPOffset)
			if !r1 || !r2 || !r3 {
				return frames, false
			}
			exact = true
			continue
		case KindEnd:
			return frames, true
		default:
			return frames, false
		}
		ra, ok := w.s.read8(cfa - 8)
		if !ok {
			return frames, false
		}
		switch {
		case row.Kind == KindDerefRBP:
			if rbp, ok = w.s.read8(rbp); !ok {
				return frames, false
			}
		case row.RBPSaved:
			if rbp, ok = w.s.read8(cfa + uint64(int64(row.RBPOffset))); !ok {
				return frames, false
			}
		}
		pc, rsp, exact = ra, cfa, false
	}
	return frames, false
}

func TestWalkRealStack(t *testing.T) {
	for _, tt := range []struct {
		name  string
		flags []string
	}{
		{"omit-frame-pointer", []string{"-O2", "-fomit-frame-pointer"}},
		{"frame-pointer", []string{"-O2", "-fno-omit-frame-pointer"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			plugin := filepath.Join(dir, "libstackplugin.so")
			run(t, "gcc", append(append([]string{"-shared", "-fPIC"}, tt.flags...), "-o", plugin, filepath.Join(fixtureDir, "stackplugin.c"))...)
			bin := compile(t, "stack.c", "stack", tt.flags...)
			snap := filepath.Join(dir, "snap")
			run(t, bin, snap, plugin)

			w := &walker{t: t, s: readSnapshot(t, snap), cache: NewCache(nil), modules: map[string]*module{}}
			frames, complete := w.walk()
			t.Logf("stack: %v", frames)
			if !complete {
				t.Fatalf("walk stopped at %v", frames[len(frames)-1])
			}
			// The frames of the fixture and its plugin, in order, and where
			// the signal frame and libc's frames sit among them.
			var got []string
			for _, f := range frames {
				switch {
				case f.kind == KindSignal:
					got = append(got, "<signal>")
				case f.module == bin || f.module == plugin:
					got = append(got, f.fn)
				case len(got) == 0 || got[len(got)-1] != "<libc>":
					got = append(got, "<libc>")
				}
			}
			want := []string{"capture", "handler", "<signal>", "<libc>", "level3", "drap", "level1", "plugin_through", "main", "<libc>", "_start"}
			if strings.Join(got, " ") != strings.Join(want, " ") {
				t.Errorf("frames\n got %v\nwant %v", got, want)
			}
			if last := frames[len(frames)-1]; last.kind != KindEnd || last.fn != "_start" {
				t.Errorf("last frame %v, want _start with KindEnd", last)
			}
		})
	}
}
