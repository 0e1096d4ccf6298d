package symbolize

import (
	"debug/elf"
	"encoding/binary"
	"sync"

	"golang.org/x/arch/x86/x86asm"
)

// A call site is reported by its return address, but the place a person
// wants is the call instruction before it. On x86-64 instructions have no
// fixed length, so the call's start is found by recognizing the call
// encodings that end at the return address: E8 rel32 (whose target must be
// code of the module: a direct call never leaves it, calls to other modules
// go through its PLT) and the FF /2 forms of an indirect call (register or
// memory operand, with a REX or notrack prefix). When more than one
// encoding fits the bytes, the function is decoded from its first
// instruction (its symbol) up to the return address to tell which; when
// none fits, the call is taken to end at ret-1, which lies inside it
// whatever its length.

// site is what a return address resolves to within its module, the same
// for every process that maps the module.
type site struct {
	call     uint64 // ELF virtual address of the call instruction
	function string
	file     string
	line     int
	inlined  []InlineFrame
}

// siteCache remembers resolved sites by the ELF virtual address of their
// return address. A warm lookup is one map read; the cache is emptied when
// it reaches maxCachedSites rather than grow without bound.
type siteCache struct {
	mu sync.RWMutex
	m  map[uint64]*site
}

const maxCachedSites = 1 << 18

func (c *siteCache) get(ret uint64) (*site, bool) {
	c.mu.RLock()
	s, ok := c.m[ret]
	c.mu.RUnlock()
	return s, ok
}

func (c *siteCache) put(ret uint64, s *site) {
	c.mu.Lock()
	if c.m == nil || len(c.m) >= maxCachedSites {
		c.m = make(map[uint64]*site)
	}
	c.m[ret] = s
	c.mu.Unlock()
}

// siteAt resolves the call that returns to the ELF virtual address ret.
func (m *Module) siteAt(ret uint64) *site {
	if s, ok := m.sites.get(ret); ok {
		return s
	}
	m.lookMu.Lock() // Module.lookMu
	defer m.lookMu.Unlock()
	if s, ok := m.sites.get(ret); ok {
		return s // named meanwhile on another goroutine
	}
	call := m.callInsn(ret)
	s := &site{call: call, function: m.Function(call)}
	s.file, s.line = m.line(call)
	s.inlined = m.inlineChain(call, s.file, s.line, s.function)
	m.sites.put(ret, s)
	return s
}

// inlineChain is the chain of inlined calls at vaddr (see Frame.Inlined),
// or nil when vaddr is not in inlined code.
func (m *Module) inlineChain(vaddr uint64, file string, line int, fn string) []InlineFrame {
	m.dwarfOnce.Do(m.loadDWARF)
	var out []InlineFrame
	_ = guard("inline chain", func() error {
		if m.dw == nil {
			// No DWARF: a Go executable's inline trees (gopclntab).
			if t := m.goTable(); t != nil {
				for _, c := range t.Inlined(vaddr) {
					out = append(out, InlineFrame{Function: c.Function, File: c.File, Line: c.Line})
				}
			}
			return nil
		}
		if u, node := m.dw.inlineAt(vaddr); u != nil {
			out = u.chain(node, file, line, fn)
		}
		return nil
	})
	return out
}

// execSegments keeps the executable PT_LOAD headers.
func execSegments(f *elf.File) []segment {
	var segs []segment
	for _, p := range f.Progs {
		if p.Type == elf.PT_LOAD && p.Flags&elf.PF_X != 0 && p.Vaddr+p.Memsz >= p.Vaddr {
			segs = append(segs, segment{off: p.Off, filesz: p.Memsz, vaddr: p.Vaddr})
		}
	}
	return segs
}

func (m *Module) isCode(vaddr uint64) bool {
	for _, s := range m.execSegs {
		if vaddr >= s.vaddr && vaddr-s.vaddr < s.filesz {
			return true
		}
	}
	return false
}

// maxDecodeBytes bounds the forward decoding from a function's start: past
// it the first encoding that fits is taken.
const maxDecodeBytes = 4096

// callInsn returns the ELF virtual address of the call instruction that
// returns to ret.
func (m *Module) callInsn(ret uint64) uint64 {
	if ret < 2 {
		return ret - min(ret, 1)
	}
	n := uint64(7)
	var code []byte
	for ; n >= 2; n-- {
		if ret < n {
			continue
		}
		if c, ok := m.readCode(ret-n, int(n)); ok {
			code = c
			break
		}
	}
	starts := m.callsEndingAt(code, ret)
	switch len(starts) {
	case 0:
		return ret - 1
	case 1:
		return ret - uint64(len(code)-starts[0])
	}
	// Several encodings fit: decode the function up to ret.
	if start, ok := m.funcStart(ret - 1); ok && ret-start <= maxDecodeBytes {
		if fn, ok := m.readCode(start, int(ret-start)); ok {
			if at, ok := lastInstruction(fn); ok && at.call {
				return start + uint64(at.start)
			}
		}
	}
	return ret - uint64(len(code)-starts[0]) // the first: E8, else the longest
}

type decoded struct {
	start int
	call  bool
}

// lastInstruction decodes code from its start and returns the instruction
// that ends exactly at its end, if decoding lands there.
func lastInstruction(code []byte) (decoded, bool) {
	for off := 0; off < len(code); {
		if isEndbr(code[off:]) { // x86asm does not know endbr64 (CET)
			off += 4
			if off == len(code) {
				return decoded{start: off - 4}, true
			}
			continue
		}
		inst, err := x86asm.Decode(code[off:], 64)
		if err != nil || inst.Len <= 0 || inst.Op == 0 {
			// Op 0: bytes x86asm takes for a lone prefix (an instruction
			// it does not know, or one cut short).
			return decoded{}, false
		}
		if off+inst.Len == len(code) {
			return decoded{start: off, call: inst.Op == x86asm.CALL}, true
		}
		off += inst.Len
	}
	return decoded{}, false
}

// isEndbr reports whether b starts with endbr64 or endbr32.
func isEndbr(b []byte) bool {
	return len(b) >= 4 && b[0] == 0xf3 && b[1] == 0x0f && b[2] == 0x1e && (b[3] == 0xfa || b[3] == 0xfb)
}

// callsEndingAt lists where in code a call instruction can start that ends
// at the end of code, the return address ret: E8 rel32 with a target in
// the module's code first, then the FF /2 forms (with a REX or notrack
// prefix when present), longest first.
func (m *Module) callsEndingAt(code []byte, ret uint64) []int {
	var starts []int
	n := len(code)
	if n >= 5 && code[n-5] == 0xe8 {
		target := ret + uint64(int64(int32(binary.LittleEndian.Uint32(code[n-4:]))))
		if m.isCode(target) {
			starts = append(starts, n-5)
		}
	}
	return append(starts, IndirectCallStarts(code)...)
}

// IndirectCallStarts lists where in code an indirect call (call r/m64,
// FF /2, with a REX or notrack prefix when present) can start that ends
// exactly at the end of code, longest first.
func IndirectCallStarts(code []byte) []int {
	var starts []int
	n := len(code)
	for start := 0; start <= n-2; start++ {
		if code[start] != 0xff || (code[start+1]>>3)&7 != 2 {
			continue
		}
		sib := byte(0)
		if start+2 < n {
			sib = code[start+2]
		}
		if start+1+modrmLen(code[start+1], sib) != n {
			continue
		}
		if start > 0 && (code[start-1]&0xf0 == 0x40 || code[start-1] == 0x3e) {
			starts = append(starts, start-1)
		} else {
			starts = append(starts, start)
		}
	}
	return starts
}

// modrmLen is the length of a ModRM byte with its SIB and displacement.
func modrmLen(modrm, sib byte) int {
	mod, rm := modrm>>6, modrm&7
	l := 1
	if mod != 3 && rm == 4 {
		l++ // SIB
		if mod == 0 && sib&7 == 5 {
			l += 4
		}
	}
	switch {
	case mod == 1:
		l++
	case mod == 2:
		l += 4
	case mod == 0 && rm == 5:
		l += 4 // rip-relative
	}
	return l
}
