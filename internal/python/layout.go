// Package python finds how to read a CPython process's frames and code
// objects from outside it: which file is its interpreter, where
// _PyRuntime and its gilstate TSS key sit, which minor version it runs and
// the offsets of the structures the probes and the symbolizer read. It
// reads files and /proc only: nothing of eBPF.
package python

import (
	"bytes"
	"debug/elf"
	"encoding/binary"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"github.com/memtrace/memtrace/internal/procfs"
	"github.com/memtrace/memtrace/internal/symbolize"
)

// ErrNotPython: the process maps no CPython interpreter.
var ErrNotPython = errors.New("no CPython interpreter mapped")

// ErrUnknownVersion: the interpreter's version has no known layout; its
// frames are not read (native frames only).
var ErrUnknownVersion = errors.New("unknown CPython version")

// Frame says where a frame keeps what the probes read; offsets from the
// frame's start, each below 128 (bpf/python.h reads 128 bytes a frame).
type Frame struct {
	Code, Prev, Instr uint32
	// Entry is the byte saying where the frame's eval loop call began
	// (3.11: is_entry) or who owns the frame (3.12+: owner); 0: none.
	Entry uint32
}

// Code is the layout of a code object and the strings it names.
type Code struct {
	FirstLine, Filename, Name, Qualname, Linetable uint32
	// Adaptive is where the instructions start (co_code_adaptive; 3.11+).
	Adaptive uint32
	// ASCIIData and CompactData: where a compact str's characters start,
	// ASCII and not.
	ASCIIData, CompactData uint32
}

// Layout is one interpreter's, as found in a process.
type Layout struct {
	Major, Minor int
	// Module is the interpreter file as the process names it; Path opens it.
	Module, Path string
	// Runtime is _PyRuntime's address in the process, TSSKey its
	// autoTSSkey's (a Py_tss_t), CodeType PyCode_Type's (0: not found).
	Runtime, TSSKey, CodeType uint64
	// TstateFrame: the offset in PyThreadState of the current frame, or
	// of the cframe when CFrameFrame >= 0 (the frame's offset there).
	TstateFrame uint32
	CFrameFrame int32
	Frame       Frame
	Code        Code
	// Text is the interpreter's code in the process: [Start, End) ranges.
	Text [][2]uint64

	fixed      bool   // an ET_EXEC file: loaded at its own addresses
	firstVaddr uint64 // its first segment's page
}

// Version is "3.11".
func (l *Layout) Version() string { return fmt.Sprintf("%d.%d", l.Major, l.Minor) }

// Entry reports whether a frame's entry byte e says the frame is the first
// one its eval loop call ran (the C caller's): 3.11's is_entry; from
// 3.12, a frame whose previous one is owned by the C stack, which the
// probes record as owner 3 on that shim frame itself.
func (l *Layout) Entry(e uint8) bool { return l.Minor == 11 && e != 0 }

// Shim reports whether a frame is the C stack's entry shim (3.12+, owner
// FRAME_OWNED_BY_CSTACK): no Python code of the program's.
func (l *Layout) Shim(e uint8) bool { return l.Minor >= 12 && e == 3 }

// Tagged reports whether the probes tag each frame's code object with its
// co_filename and co_name pointers (symbolize.PythonTag): they read 16
// bytes from co_filename, so co_name must follow it.
func (l *Layout) Tagged() bool { return l.Code.Filename != 0 && l.Code.Name == l.Code.Filename+8 }

// NameTagged reports whether a kept tag can fold in co_name's characters:
// their start is within what the probes read of a str (bpf/python.h's
// PY_STR_READ, from its length on) for both kinds of compact str.
func (l *Layout) NameTagged() bool {
	ok := func(off uint32) bool { return off >= 32 && off+16 <= symbolize.PythonNameRead+16 && off%8 == 0 }
	return l.Tagged() && ok(l.Code.ASCIIData) && ok(l.Code.CompactData)
}

// glibcSpecific is the offset of specific_1stblock in glibc's struct
// pthread (the TCB at fsbase), x86-64, glibc 2.26 to 2.40.
const glibcSpecific = 0x310

// TSDOffset is where the probes find a thread's TSS values from fsbase.
func (l *Layout) TSDOffset() uint32 { return glibcSpecific }

// known are the layouts of 3.10 to 3.12 (read from their debug info and
// checked against Py_Version and PyCode_Type's tp_basicsize), and 3.13's
// as a fallback when its _Py_DebugOffsets cannot be read.
var known = map[int]struct {
	tss    uint64 // autoTSSkey's offset in _PyRuntime
	tstate uint32
	cframe int32
	frame  Frame
	code   Code
}{
	10: {584, 24, -1, Frame{Code: 32, Prev: 24, Instr: 96}, Code{40, 104, 112, 112, 120, 0, 48, 72}},
	11: {592, 56, 8, Frame{Code: 32, Prev: 48, Instr: 56, Entry: 68}, Code{72, 112, 120, 128, 136, 184, 48, 72}},
	12: {1544, 56, 0, Frame{Code: 0, Prev: 8, Instr: 56, Entry: 70}, Code{68, 112, 120, 128, 136, 192, 40, 56}},
	13: {2160, 72, -1, Frame{Code: 0, Prev: 8, Instr: 56, Entry: 70}, Code{68, 112, 120, 128, 136, 200, 40, 56}},
}

var interpName = regexp.MustCompile(`^(lib)?python3\.(\d+)`)

// Find finds pid's interpreter and its layout.
func Find(pid int) (*Layout, error) {
	maps, err := procfs.ReadMaps(pid)
	if err != nil {
		return nil, fmt.Errorf("python layout of %d: %w", pid, err)
	}
	tried := map[string]bool{}
	for _, m := range maps {
		base := filepath.Base(m.Path)
		if !interpName.MatchString(base) || tried[m.Path] {
			continue
		}
		tried[m.Path] = true
		path := fmt.Sprintf("/proc/%d/root%s", pid, m.Path)
		l, err := fromFile(path)
		if errors.Is(err, ErrNotPython) {
			continue
		}
		if err != nil {
			return nil, err
		}
		l.Module, l.Path = m.Path, path
		bias, ok := loadBias(maps, m.Path, l)
		if !ok {
			return nil, fmt.Errorf("python layout of %d: %s: no mapping at its start", pid, m.Path)
		}
		l.Runtime += bias
		l.TSSKey += bias
		if l.CodeType != 0 {
			l.CodeType += bias
		}
		for _, x := range maps {
			if x.Path == m.Path && strings.Contains(x.Perms, "x") {
				l.Text = append(l.Text, [2]uint64{x.Start, x.End})
			}
		}
		return l, nil
	}
	return nil, fmt.Errorf("process %d: %w", pid, ErrNotPython)
}

// loadBias is what the process added to the file's virtual addresses: 0
// for a fixed executable, else where its first segment is mapped less
// that segment's address.
func loadBias(maps []procfs.Mapping, path string, l *Layout) (uint64, bool) {
	if l.fixed {
		return 0, true
	}
	for _, m := range maps {
		if m.Path == path && m.Offset == 0 {
			return m.Start - l.firstVaddr, true
		}
	}
	return 0, false
}

// fromFile reads an interpreter file's version and layout.
func fromFile(path string) (l *Layout, err error) {
	defer func() {
		if r := recover(); r != nil {
			l, err = nil, fmt.Errorf("read %s: malformed ELF: %v", path, r)
		}
	}()
	f, err := elf.Open(path)
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	defer f.Close()
	syms, err := f.DynamicSymbols()
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, ErrNotPython)
	}
	var runtime, version, codeType uint64
	for _, s := range syms {
		if s.Section == elf.SHN_UNDEF {
			continue
		}
		switch s.Name {
		case "_PyRuntime":
			runtime = s.Value
		case "Py_Version":
			version = s.Value
		case "PyCode_Type":
			codeType = s.Value
		}
	}
	if runtime == 0 {
		return nil, fmt.Errorf("%s: %w", path, ErrNotPython)
	}
	l = &Layout{Runtime: runtime, CodeType: codeType, fixed: f.Type == elf.ET_EXEC}
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD {
			l.firstVaddr = p.Vaddr &^ 0xfff
			break
		}
	}
	if version != 0 {
		b, err := readAt(f, version, 4)
		if err != nil {
			return nil, fmt.Errorf("read Py_Version of %s: %w", path, err)
		}
		v := binary.LittleEndian.Uint32(b)
		l.Major, l.Minor = int(v>>24), int(v>>16&0xff)
	} else if m := interpName.FindStringSubmatch(filepath.Base(path)); m != nil {
		// 3.10 has no Py_Version: its file name says.
		l.Major = 3
		l.Minor, _ = strconv.Atoi(m[2])
	}
	k, ok := known[l.Minor]
	if l.Major != 3 || !ok {
		return nil, fmt.Errorf("%s: %w %d.%d (3.10 to 3.13 are)", path, ErrUnknownVersion, l.Major, l.Minor)
	}
	l.TSSKey = runtime + k.tss // a Py_tss_t: int _is_initialized, then the key
	l.TstateFrame, l.CFrameFrame, l.Frame, l.Code = k.tstate, k.cframe, k.frame, k.code
	if l.Minor >= 13 {
		if err := l.debugOffsets(f, runtime); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	if codeType != 0 {
		if err := l.checkMembers(f, codeType); err != nil {
			return nil, fmt.Errorf("%s: %w", path, err)
		}
	}
	if l.Minor >= 11 && codeType != 0 {
		// PyCode_Type's tp_basicsize is where the instructions start.
		b, err := readAt(f, codeType+32, 8)
		if err != nil {
			return nil, fmt.Errorf("read PyCode_Type of %s: %w", path, err)
		}
		if got := binary.LittleEndian.Uint64(b); got != uint64(l.Code.Adaptive) {
			return nil, fmt.Errorf("%s: %w %d.%d: code objects of %d bytes, want %d",
				path, ErrUnknownVersion, l.Major, l.Minor, got, l.Code.Adaptive)
		}
	}
	return l, nil
}

// debugOffsets takes 3.13's offsets from the _Py_DebugOffsets that opens
// _PyRuntime (cookie "xdebugpy"), as the interpreter publishes them.
func (l *Layout) debugOffsets(f *elf.File, runtime uint64) error {
	b, err := readAt(f, runtime, 352)
	if err != nil {
		return fmt.Errorf("read _Py_DebugOffsets: %w", err)
	}
	if !bytes.Equal(b[:8], []byte("xdebugpy")) {
		return fmt.Errorf("%w: no _Py_DebugOffsets in _PyRuntime", ErrUnknownVersion)
	}
	u := func(off int) uint32 { return uint32(binary.LittleEndian.Uint64(b[off:])) }
	if u(16) != 0 {
		return fmt.Errorf("%w: a free-threaded build", ErrUnknownVersion)
	}
	// cookie, version, free_threaded, runtime_state (3),
	// interpreter_state (13), then thread_state: size, prev, next,
	// interp, current_frame, ...
	const thread = 24 + 3*8 + 13*8
	const frame = thread + 9*8 // size, previous, executable, instr_ptr, localsplus, owner
	const code = frame + 6*8   // size, filename, name, qualname, linetable, firstlineno, argcount, localsplusnames, localspluskinds, co_code_adaptive
	got := Layout{TstateFrame: u(thread + 4*8), CFrameFrame: -1,
		Frame: Frame{Prev: u(frame + 8), Code: u(frame + 16), Instr: u(frame + 24), Entry: u(frame + 40)},
		Code: Code{Filename: u(code + 8), Name: u(code + 16), Qualname: u(code + 24), Linetable: u(code + 32),
			FirstLine: u(code + 40), Adaptive: u(code + 72), ASCIIData: l.Code.ASCIIData, CompactData: l.Code.CompactData}}
	for _, o := range []uint32{got.Frame.Prev, got.Frame.Code, got.Frame.Instr, got.Frame.Entry} {
		if o >= 128 {
			return fmt.Errorf("%w: _Py_DebugOffsets: a frame field at %d", ErrUnknownVersion, o)
		}
	}
	l.TstateFrame, l.CFrameFrame, l.Frame, l.Code = got.TstateFrame, got.CFrameFrame, got.Frame, got.Code
	return nil
}

// readAt reads n bytes at virtual address addr from the file's data.
func readAt(f *elf.File, addr uint64, n int) ([]byte, error) {
	for _, p := range f.Progs {
		if p.Type != elf.PT_LOAD || addr < p.Vaddr || addr+uint64(n) > p.Vaddr+p.Filesz {
			continue
		}
		b := make([]byte, n)
		if _, err := p.ReadAt(b, int64(addr-p.Vaddr)); err != nil {
			return nil, err
		}
		return b, nil
	}
	return nil, fmt.Errorf("address %#x not in the file's data", addr)
}
