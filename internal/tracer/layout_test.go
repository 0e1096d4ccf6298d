package tracer

import (
	"encoding/binary"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	"github.com/cilium/ebpf/btf"

	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/symbolize"
	"github.com/memtrace/memtrace/internal/unwind"
)

// TestRecordLayout checks the Go records the drainer casts ring-buffer bytes
// to, and the map keys and values it writes, against the compiled object's
// BTF: a field added on one side only (or bindings not regenerated) would
// otherwise shift every figure silently.
func TestRecordLayout(t *testing.T) {
	spec, err := loadMemtrace()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		typ  reflect.Type
	}{
		{"event", reflect.TypeFor[memtraceEvent]()},
		{"small_event", reflect.TypeFor[memtraceSmallEvent]()},
		{"free_event", reflect.TypeFor[memtraceFreeEvent]()},
		{"site_event", reflect.TypeFor[memtraceSiteEvent]()},
		{"code_event", reflect.TypeFor[memtraceCodeEvent]()},
		{"proc_event", reflect.TypeFor[memtraceProcEvent]()},
		{"exec_event", reflect.TypeFor[memtraceExecEvent]()},
		{"alloc_counts", reflect.TypeFor[memtraceAllocCounts]()},
		{"sample_key", reflect.TypeFor[memtraceSampleKey]()},
		{"unwind_row", reflect.TypeFor[memtraceUnwindRow]()},
		{"file_key", reflect.TypeFor[memtraceFileKey]()},
		{"unwind_file", reflect.TypeFor[memtraceUnwindFile]()},
		{"file_key_query", reflect.TypeFor[memtraceFileKeyQuery]()},
	}
	for _, tt := range tests {
		st := btfStruct(t, spec.Types, tt.name)
		if uintptr(st.Size) != tt.typ.Size() {
			t.Errorf("struct %s: C has %d bytes, Go %d", tt.name, st.Size, tt.typ.Size())
		}
		// Member by member, in order: bpf2go names Go fields after C's.
		var fields []reflect.StructField
		for i := range tt.typ.NumField() {
			if f := tt.typ.Field(i); f.Name != "_" {
				fields = append(fields, f)
			}
		}
		if len(fields) != len(st.Members) {
			t.Errorf("struct %s: C has %d members, Go %d fields", tt.name, len(st.Members), len(fields))
			continue
		}
		for i, m := range st.Members {
			f := fields[i]
			if !strings.EqualFold(strings.ReplaceAll(m.Name, "_", ""), f.Name) || uintptr(m.Offset.Bytes()) != f.Offset {
				t.Errorf("struct %s: C member %s at %d, Go field %s at %d", tt.name, m.Name, m.Offset.Bytes(), f.Name, f.Offset)
			}
		}
	}
	// The ring record must stay small: every byte is copied per event.
	if s := unsafe.Sizeof(memtraceEvent{}); s != 72 {
		t.Errorf("struct event is %d bytes, want 72", s)
	}
	// The drainer tells the records apart by their lengths.
	if s := unsafe.Sizeof(memtraceSmallEvent{}); s != 48 {
		t.Errorf("struct small_event is %d bytes, want 48", s)
	}
	if s := unsafe.Sizeof(memtraceFreeEvent{}); s != 16 {
		t.Errorf("struct free_event is %d bytes, want 16", s)
	}
	if s := unsafe.Sizeof(memtraceSiteEvent{}); s != 32 {
		t.Errorf("struct site_event is %d bytes, want 32", s)
	}
}

// TestConstants checks the constants event/ and unwind/ keep by hand
// (they import nothing from eBPF) against the enums in the object's BTF,
// value by value: every value of each enum must be listed here, so that one
// added in C fails until Go has it too.
func TestConstants(t *testing.T) {
	spec, err := loadMemtrace()
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		enum string
		goes map[string]uint64 // C name: Go value
	}{
		{"event_kind", map[string]uint64{
			"KIND_ALLOC": uint64(event.Alloc), "KIND_FREE": uint64(event.Free), "KIND_REALLOC": uint64(event.Realloc),
			"KIND_MMAP": uint64(event.Mmap), "KIND_MUNMAP": uint64(event.Munmap), "KIND_MREMAP": uint64(event.Mremap),
			"KIND_CODE_MAP": uint64(event.CodeMap), "KIND_EXEC": uint64(event.Exec), "KIND_EXIT": uint64(event.Exit),
			"KIND_MARK":        uint64(event.Mark),
			"KIND_UNWIND_MISS": uint64(kindUnwindMiss), // the drainer's own: never an event.Event
			"KIND_FAULT":       uint64(event.Fault),
			"KIND_REFAULT":     uint64(event.Refault),
			"KIND_MOVED":       uint64(event.Moved),
			// The drainer's own too: it tells the Python stacks.
			"KIND_PY_CODE_FREED": uint64(kindPyCodeFreed),
		}},
		{"func_id", map[string]uint64{
			"FUNC_MALLOC": uint64(event.FuncMalloc), "FUNC_CALLOC": uint64(event.FuncCalloc),
			"FUNC_REALLOC": uint64(event.FuncRealloc), "FUNC_REALLOCARRAY": uint64(event.FuncReallocarray),
			"FUNC_POSIX_MEMALIGN": uint64(event.FuncPosixMemalign), "FUNC_ALIGNED_ALLOC": uint64(event.FuncAlignedAlloc),
			"FUNC_MEMALIGN": uint64(event.FuncMemalign), "FUNC_VALLOC": uint64(event.FuncValloc),
			"FUNC_PVALLOC": uint64(event.FuncPvalloc), "FUNC_FREE": uint64(event.FuncFree),
			"FUNC_MMAP": uint64(event.FuncMmap), "FUNC_MUNMAP": uint64(event.FuncMunmap),
			"FUNC_MREMAP": uint64(event.FuncMremap), "FUNC_WRAPPER": uint64(event.FuncWrapper),
			"FUNC_DLOPEN": uint64(event.FuncDlopen), "FUNC_MARK": uint64(event.FuncMark),
		}},
		{"func_domain", map[string]uint64{
			"FUNC_PY": uint64(event.FuncPython), "FUNC_BASE_MASK": uint64(event.FuncPython - 1),
			"FUNC_PY_CODE_FREE": uint64(event.FuncPyCodeFree), "FUNC_PY_POOL": uint64(event.FuncPyPool),
		}},
		{"frame_bit", map[string]uint64{"FRAME_EXACT_BIT": uint64(bitOf(t, event.FrameExact))}},
		{"fault_pc", map[string]uint64{"FAULT_PC_EXECVE": symbolize.ExecveSite}},
		{"tag_addr", map[string]uint64{"TAG_ADDR_BITS": uint64(tagAddrBits)}},
		{"unwind_kind", map[string]uint64{
			"UNWIND_UNDEFINED": uint64(unwind.KindUndefined), "UNWIND_RSP": uint64(unwind.KindRSP),
			"UNWIND_RBP": uint64(unwind.KindRBP), "UNWIND_PLT": uint64(unwind.KindPLT),
			"UNWIND_DEREF_RBP": uint64(unwind.KindDerefRBP), "UNWIND_SIGNAL": uint64(unwind.KindSignal),
			"UNWIND_END": uint64(unwind.KindEnd),
		}},
		{"row_flag", map[string]uint64{
			"ROW_KIND_MASK": uint64(unwind.KindMask), "ROW_RBP_SAVED": uint64(unwind.RBPSavedBit),
			"ROW_ANON": uint64(unwind.FlagAnon), "ROW_WRAPPER": uint64(unwind.FlagWrapper),
			"ROW_MEMFN": uint64(unwind.FlagMemFn),
		}},
		{"uc_offset", map[string]uint64{
			"UC_RBP": unwind.SignalRBPOffset, "UC_RSP": unwind.SignalRSPOffset, "UC_RIP": unwind.SignalRIPOffset,
		}},
	}
	for _, tt := range tests {
		var e *btf.Enum
		if err := spec.Types.TypeByName(tt.enum, &e); err != nil {
			t.Fatalf("enum %s not in the object's BTF: %v", tt.enum, err)
		}
		if len(e.Values) != len(tt.goes) {
			t.Errorf("enum %s: C has %d values, Go %d", tt.enum, len(e.Values), len(tt.goes))
		}
		for _, v := range e.Values {
			g, ok := tt.goes[v.Name]
			switch {
			case !ok:
				t.Errorf("enum %s: %s = %d has no Go counterpart", tt.enum, v.Name, v.Value)
			case g != v.Value:
				t.Errorf("enum %s: %s is %d in C, %d in Go", tt.enum, v.Name, v.Value, g)
			}
		}
	}
}

// TestRowEncoding checks unwind.Encode, which writes the rows the walk
// reads, against struct unwind_row's members in the BTF.
func TestRowEncoding(t *testing.T) {
	spec, err := loadMemtrace()
	if err != nil {
		t.Fatal(err)
	}
	st := btfStruct(t, spec.Types, "unwind_row")
	if st.Size != unwind.RowSize {
		t.Fatalf("struct unwind_row: C has %d bytes, unwind.RowSize is %d", st.Size, unwind.RowSize)
	}
	row := unwind.Row{PC: 0x12345678, CFAOffset: -300, Kind: unwind.KindRBP, RBPSaved: true, RBPOffset: -16, Flags: unwind.FlagWrapper}
	tab := unwind.Table{Rows: []unwind.Row{row}}
	b, err := tab.Encode()
	if err != nil {
		t.Fatal(err)
	}
	off := map[string]uint32{}
	for _, m := range st.Members {
		off[m.Name] = m.Offset.Bytes()
	}
	tests := []struct {
		member string
		got    uint64
		want   uint64
	}{
		{"pc", uint64(binary.LittleEndian.Uint32(b[off["pc"]:])), 0x12345678},
		{"cfa_off", uint64(int16(binary.LittleEndian.Uint16(b[off["cfa_off"]:])) + 1000), -300 + 1000},
		{"kind", uint64(b[off["kind"]]), uint64(memtraceUnwindKindUNWIND_RBP) | uint64(memtraceRowFlagROW_RBP_SAVED) | uint64(memtraceRowFlagROW_WRAPPER)},
		{"rbp_off8", uint64(int8(b[off["rbp_off8"]]) + 100), -2 + 100},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("unwind_row.%s: encoded %#x, want %#x", tt.member, tt.got, tt.want)
		}
	}
}

func btfStruct(t *testing.T, types *btf.Spec, name string) *btf.Struct {
	t.Helper()
	var st *btf.Struct
	if err := types.TypeByName(name, &st); err != nil {
		t.Fatalf("struct %s not in the object's BTF: %v", name, err)
	}
	return st
}

// bitOf is the index of the one bit set in v.
func bitOf(t *testing.T, v uint64) int {
	t.Helper()
	for i := range 64 {
		if v == 1<<i {
			return i
		}
	}
	t.Fatalf("%#x has not exactly one bit set", v)
	return -1
}
