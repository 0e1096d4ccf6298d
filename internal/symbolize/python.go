package symbolize

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"
	"strconv"
	"sync"
	"unicode/utf8"

	"github.com/memtrace/memtrace/internal/procfs"
)

// PythonBase is the first of the addresses that stand for Python frames
// (PythonCode.Frame): bit 62, no user address and no exact frame (bit
// 63), so that they travel wherever a return address does, and Resolve
// gives back the frame's function, file and line.
const PythonBase = uint64(1) << 62

// IsPython reports whether addr stands for a Python frame.
func IsPython(addr uint64) bool { return addr&(3<<62) == PythonBase }

// PythonLayout is what reading a CPython process's code objects needs
// (python.Layout's code part).
type PythonLayout struct {
	Minor                                          int
	FirstLine, Filename, Name, Qualname, Linetable uint32
	Adaptive, ASCIIData, CompactData               uint32
	// Tagged: the probes record each frame's PythonTag (co_name follows
	// co_filename in the code object).
	Tagged bool
	// NameTagged: the tags are PythonNameTag, with co_name's characters
	// (the probes keep each code object's until its free).
	NameTagged bool
	// CodeType is PyCode_Type's address in the process: a code object's
	// ob_type (0: not checked).
	CodeType uint64
}

// PythonTag folds a code object's co_filename and co_name pointers into
// the 16 bits the probes record beside its address (bpf/python.h's
// py_tag), where they read it at every frame: a code object freed and
// replaced at the same address by the time its names are read has
// another tag, unless the new one's strings took the old one's addresses
// (PythonNameTag tells those apart).
func PythonTag(file, name uint64) uint16 {
	return uint16((file ^ name*0x9e3779b97f4a7c15) * 0xff51afd7ed558ccd >> 48)
}

// PythonNameRead is how much of co_name PythonNameTag reads, from its
// length on (bpf/python.h's PY_STR_READ).
const PythonNameRead = 72

// PythonNameTag is PythonTag with co_name's length and first 16 bytes of
// characters folded in (bpf/python.h's py_name_tag): s holds the str
// object from its length on, PythonNameRead bytes. The next code object
// at an address often has its names' strings where the last one's were;
// their characters differ.
func PythonNameTag(file, name uint64, s []byte, asciiOff, compactOff uint32) uint16 {
	le := binary.LittleEndian
	n, state := le.Uint64(s), le.Uint32(s[16:])
	off := compactOff - 16
	if state&0x40 != 0 {
		off = asciiOff - 16
	}
	off &= 0x38
	w0, w1 := le.Uint64(s[off:]), le.Uint64(s[off+8:])
	bytes := n * uint64(state>>2&7)
	if bytes < 16 {
		if bytes > 8 {
			w1 &= 1<<(8*(bytes-8)) - 1
		} else {
			w1 = 0
		}
	}
	if bytes < 8 {
		w0 &= 1<<(8*bytes) - 1
	}
	return uint16((file ^ name*0x9e3779b97f4a7c15 ^ n*0xc2b2ae3d27d4eb4f ^ w0*0x165667b19e3779f9 ^
		w1*0x85ebca77c2b2ae63) * 0xff51afd7ed558ccd >> 48)
}

// pyCode is one code object as read from its process.
type pyCode struct {
	// names are the code object's co_filename, co_name and co_qualname
	// pointers: read again to tell a code object freed and replaced at
	// the same address.
	names     [3]uint64
	tag       uint16 // PythonTag of names
	file      string
	function  string
	firstLine int
	table     []byte
	// units: the instructions' length in code units (3.11+: the code
	// object's ob_size; 0: unknown). An instruction past it is not this
	// code object's: its address was reused after the event.
	units uint64
	// lines: the line of each instruction offset asked so far (code units).
	lines map[uint32]uint64
}

// pyProc is one Python process's code objects and frames.
type pyProc struct {
	layout PythonLayout
	mem    *os.File
	codes  map[uint64]*pyCode
	// replaced: code objects read before another took their address, by
	// address and tag, for the events still to come that ran them.
	replaced map[pyReplaced]*pyCode
	// checked: the batch (PythonCode.Batch) in which each code object
	// was last checked against its process.
	checked map[uint64]uint64
	// dead: the code objects (address and tag) found freed in batch
	// deadBatch, not read again in it: a reader behind a process that
	// makes and drops code objects meets one in event after event.
	dead      map[pyReplaced]bool
	deadBatch uint64
}

// pythonFrames maps the addresses that stand for Python frames to them.
type pythonFrames struct {
	mu     sync.Mutex
	procs  map[int]*pyProc
	frames []Frame // by (address - PythonBase) >> 1
	ids    map[pyFrameKey]uint64
	batch  uint64
}

type pyReplaced struct {
	code uint64
	tag  uint16
}

// maxPyReplaced bounds a process's replaced code objects kept.
const maxPyReplaced = 4096

// PythonFreed is the function of a frame whose code object was freed,
// and its address reused, before memtrace read its names.
const PythonFreed = "[python code freed before it was named]"

type pyFrameKey struct {
	pid      int
	file     string
	function string
	line     int
}

// AddPython has Resolve read pid's code objects with layout l.
func (r *Resolver) AddPython(pid int, l PythonLayout) error {
	mem, err := os.Open("/proc/" + strconv.Itoa(pid) + "/mem")
	if err != nil {
		return fmt.Errorf("read python code of %d: %w", pid, procfs.GoneOr(err))
	}
	r.py.mu.Lock()
	defer r.py.mu.Unlock()
	if r.py.procs == nil {
		r.py.procs, r.py.ids = map[int]*pyProc{}, map[pyFrameKey]uint64{}
	}
	if old := r.py.procs[pid]; old != nil {
		old.mem.Close()
	}
	r.py.procs[pid] = &pyProc{layout: l, mem: mem, codes: map[uint64]*pyCode{}, checked: map[uint64]uint64{},
		replaced: map[pyReplaced]*pyCode{}}
	return nil
}

// ForgetPython drops pid's code objects (its frames' addresses still resolve).
func (r *Resolver) ForgetPython(pid int) {
	r.py.mu.Lock()
	defer r.py.mu.Unlock()
	if p := r.py.procs[pid]; p != nil {
		p.mem.Close()
		delete(r.py.procs, pid)
	}
}

// PythonCodeFreed drops pid's code object at code: the probes saw it
// freed, after every event that ran it. The next code object at code is
// read afresh, even where its tag is the last one's (its names' strings
// where the last one's were).
func (r *Resolver) PythonCodeFreed(pid int, code uint64) {
	r.py.mu.Lock()
	defer r.py.mu.Unlock()
	p := r.py.procs[pid]
	if p == nil {
		return
	}
	// No event still to come ran it: it is neither kept nor replaced
	// (replace keeps code objects for such events only where their free
	// was not seen).
	if c := p.codes[code]; c != nil {
		delete(p.replaced, pyReplaced{code, c.tag})
	}
	delete(p.codes, code)
	delete(p.checked, code)
	for k := range p.dead {
		if k.code == code {
			delete(p.dead, k)
		}
	}
}

// NextPythonBatch starts a new batch of events: a code object met again
// in it is checked once against its process (its names' pointers read
// again), not at every event.
func (r *Resolver) NextPythonBatch() {
	r.py.mu.Lock()
	r.py.batch++
	r.py.mu.Unlock()
}

// PythonFrame returns the address that stands for the Python frame
// running code object code (tagged tag, PythonTag) at instruction offset
// instr (in code units), and false when the code object cannot be read.
// A code object replaced at its address before it was read gives the
// frame PythonFreed: its names are gone.
func (r *Resolver) PythonFrame(pid int, code uint64, tag uint16, instr uint32) (uint64, bool) {
	r.py.mu.Lock()
	defer r.py.mu.Unlock()
	p := r.py.procs[pid]
	if p == nil {
		return 0, false
	}
	c, err := p.code(code, tag, r.py.batch)
	if err != nil {
		return 0, false
	}
	if c == nil {
		return r.py.frameID(pyFrameKey{pid: pid, function: PythonFreed}), true
	}
	if c.units != 0 && uint64(instr) >= c.units {
		return 0, false
	}
	line, ok := c.lines[instr]
	if !ok {
		line = uint64(c.line(p.layout.Minor, instr))
		c.lines[instr] = line
	}
	return r.py.frameID(pyFrameKey{pid, c.file, c.function, int(line)}), true
}

// code returns the code object an event ran at address code with tag,
// nil when it was replaced before it was read. A code object met again
// with its tag is taken as read; one whose tag differs, or met in a
// process whose probes read no tag (once per batch), is checked against
// its process.
func (p *pyProc) code(code uint64, tag uint16, batch uint64) (*pyCode, error) {
	tagged := p.layout.Tagged
	c := p.codes[code]
	if c != nil && tagged && c.tag == tag {
		// The probes read this object's names with the event: no read
		// here (a replaced object with the same tag: one in 65536).
		return c, nil
	}
	k := pyReplaced{code, tag}
	if p.deadBatch != batch || p.dead == nil {
		p.dead, p.deadBatch = map[pyReplaced]bool{}, batch
	}
	if p.dead[k] {
		// Found gone earlier in this batch: a reader that falls behind
		// meets many events of an object replaced since, and must not
		// read its successor again for each.
		return p.replaced[k], nil
	}
	if c != nil && (p.checked[code] != batch || tagged && c.tag != tag) {
		// A name tag that differs tells another object, whose names'
		// pointers may still be the same: the live one's tag says
		// whether it is c (the event's object is older) or not.
		var names [3]uint64
		stale := p.readNames(code, &names) != nil || names != c.names
		if !stale && p.layout.NameTagged && c.tag != tag {
			live, err := p.nameTag(names)
			stale = err != nil || live != c.tag
		}
		if stale {
			p.replace(code, c)
			c = nil
		}
	}
	if c == nil {
		var err error
		if c, err = p.readCode(code); err != nil {
			var names [3]uint64
			if p.readNames(code, &names) == nil {
				// The process is there, but this is no code object:
				// the event's was freed before it was read, its names
				// (or their strings) reused since.
				p.dead[k] = true
				return p.replaced[k], nil
			}
			return nil, err // the process is gone
		}
		p.codes[code] = c
	}
	p.checked[code] = batch
	if tagged && c.tag != tag {
		// The event ran a code object since replaced: read before, or never.
		p.dead[k] = true
		return p.replaced[k], nil
	}
	return c, nil
}

// nameTag is the tag (PythonNameTag) of the code object whose names'
// pointers are names: one read, of its co_name.
func (p *pyProc) nameTag(names [3]uint64) (uint16, error) {
	var b [PythonNameRead]byte
	if err := p.read(b[:], names[1]+16); err != nil {
		return 0, err
	}
	return PythonNameTag(names[0], names[1], b[:], p.layout.ASCIIData, p.layout.CompactData), nil
}

// replace keeps c, replaced at its address, for the events that ran it.
func (p *pyProc) replace(code uint64, c *pyCode) {
	if len(p.replaced) >= maxPyReplaced {
		for k := range p.replaced {
			delete(p.replaced, k)
			break
		}
	}
	p.replaced[pyReplaced{code, c.tag}] = c
	delete(p.codes, code)
}

// frameID is the address standing for the frame k (py.mu held).
func (f *pythonFrames) frameID(k pyFrameKey) uint64 {
	if id, ok := f.ids[k]; ok {
		return id
	}
	id := PythonBase | uint64(len(f.frames))<<1
	f.frames = append(f.frames, Frame{Address: id, CallAddress: id, Function: k.function,
		File: k.file, Line: k.line, Module: "python", Python: true})
	f.ids[k] = id
	return id
}

// PythonFrameOf returns the Python frame addr stands for (PythonFrame).
func (r *Resolver) PythonFrameOf(addr uint64) (Frame, bool) { return r.pythonFrame(addr) }

// AddPythonFrame gives a recorded Python frame (f.Address stands for it)
// to a replay's resolver.
func (r *Resolver) AddPythonFrame(f Frame) {
	if !IsPython(f.Address) {
		return
	}
	i := (f.Address - PythonBase) >> 1
	if i >= 1<<24 {
		return // no run numbers that many lines
	}
	r.py.mu.Lock()
	defer r.py.mu.Unlock()
	for uint64(len(r.py.frames)) <= i {
		r.py.frames = append(r.py.frames, Frame{})
	}
	r.py.frames[i] = f
}

// pythonFrame resolves an address PythonFrame returned.
func (r *Resolver) pythonFrame(addr uint64) (Frame, bool) {
	r.py.mu.Lock()
	defer r.py.mu.Unlock()
	i := (addr - PythonBase) >> 1
	if i >= uint64(len(r.py.frames)) || r.py.frames[i].Address == 0 {
		return Frame{Address: addr}, false
	}
	return r.py.frames[i], true
}

func (p *pyProc) read(b []byte, addr uint64) error {
	_, err := p.mem.ReadAt(b, int64(addr))
	return err
}

func (p *pyProc) u64(addr uint64) (uint64, error) {
	var b [8]byte
	if err := p.read(b[:], addr); err != nil {
		return 0, err
	}
	return binary.LittleEndian.Uint64(b[:]), nil
}

// readNames reads a code object's co_filename, co_name and co_qualname
// pointers: one read when they are adjacent (3.11 on), else three.
func (p *pyProc) readNames(code uint64, names *[3]uint64) error {
	l := &p.layout
	if l.Name == l.Filename+8 && l.Qualname == l.Name+8 {
		var b [24]byte
		if err := p.read(b[:], code+uint64(l.Filename)); err != nil {
			return err
		}
		for i := range names {
			names[i] = binary.LittleEndian.Uint64(b[8*i:])
		}
		return nil
	}
	for i, off := range []uint32{l.Filename, l.Name, l.Qualname} {
		v, err := p.u64(code + uint64(off))
		if err != nil {
			return err
		}
		names[i] = v
	}
	return nil
}

// maxPyString bounds a name or path read from a process; maxPyTable a line table.
const (
	maxPyString = 4096
	maxPyTable  = 1 << 20
)

// errNotLive: the memory at a code object's address holds no live code
// object any more.
var errNotLive = errors.New("no live code object")

// live checks the object header at code: a live object's reference count
// is above 0 and below 2^32 (3.12's immortal objects count 2^32-1), and
// its type is PyCode_Type. A code object freed keeps its other words: its
// names still point where they did, and their strings may have been freed
// and reused (a name read from there is another object's). pymalloc's
// free writes its free list's next block (an address, or 0) over the
// reference count; malloc's its own pointers over both words.
func (p *pyProc) live(code uint64) error {
	var h [16]byte
	if err := p.read(h[:], code); err != nil {
		return err
	}
	refs, typ := binary.LittleEndian.Uint64(h[:]), binary.LittleEndian.Uint64(h[8:])
	if refs == 0 || refs >= 1<<32 || (p.layout.CodeType != 0 && typ != p.layout.CodeType) {
		return errNotLive
	}
	return nil
}

// readCode reads a code object: its names, first line and line table. The
// object must be live before and after (live): one freed while it is read
// is not named from what its memory holds.
func (p *pyProc) readCode(code uint64) (c *pyCode, err error) {
	if err := p.live(code); err != nil {
		return nil, err
	}
	defer func() {
		if err == nil {
			if err = p.live(code); err != nil {
				c = nil
			}
		}
	}()
	c = &pyCode{lines: map[uint32]uint64{}}
	if err := p.readNames(code, &c.names); err != nil {
		return nil, err
	}
	c.tag = PythonTag(c.names[0], c.names[1])
	if p.layout.NameTagged {
		if c.tag, err = p.nameTag(c.names); err != nil {
			return nil, err
		}
	}
	if c.file, err = p.str(c.names[0]); err != nil {
		return nil, err
	}
	if c.function, err = p.str(c.names[2]); err != nil {
		return nil, err
	}
	var b [4]byte
	if err := p.read(b[:], code+uint64(p.layout.FirstLine)); err != nil {
		return nil, err
	}
	c.firstLine = int(int32(binary.LittleEndian.Uint32(b[:])))
	if p.layout.Adaptive != 0 {
		if c.units, err = p.u64(code + 16); err != nil { // ob_size
			return nil, err
		}
	}
	tab, err := p.u64(code + uint64(p.layout.Linetable))
	if err != nil {
		return nil, err
	}
	if c.table, err = p.bytes(tab); err != nil {
		return nil, err
	}
	return c, nil
}

// bytes reads a bytes object's content.
func (p *pyProc) bytes(obj uint64) ([]byte, error) {
	n, err := p.u64(obj + 16) // ob_size
	if err != nil {
		return nil, err
	}
	if n > maxPyTable {
		return nil, fmt.Errorf("bytes object of %d bytes", n)
	}
	b := make([]byte, n)
	return b, p.read(b, obj+32) // ob_sval
}

// str reads a compact str object (names and paths are).
func (p *pyProc) str(obj uint64) (string, error) {
	var h [40]byte
	if err := p.read(h[:], obj); err != nil {
		return "", err
	}
	n := binary.LittleEndian.Uint64(h[16:])
	state := binary.LittleEndian.Uint32(h[32:])
	kind, compact, ascii := state>>2&7, state>>5&1, state>>6&1
	if compact == 0 || n > maxPyString || (kind != 1 && kind != 2 && kind != 4) {
		return "", fmt.Errorf("str object of %d characters, state %#x", n, state)
	}
	data := obj + uint64(p.layout.CompactData)
	if ascii != 0 {
		data = obj + uint64(p.layout.ASCIIData)
	}
	b := make([]byte, n*uint64(kind))
	if err := p.read(b, data); err != nil {
		return "", err
	}
	if kind == 1 {
		if ascii != 0 {
			return string(b), nil
		}
		rs := make([]rune, n)
		for i, c := range b {
			rs[i] = rune(c)
		}
		return string(rs), nil
	}
	rs := make([]rune, 0, n)
	for i := uint64(0); i < n; i++ {
		var r rune
		if kind == 2 {
			r = rune(binary.LittleEndian.Uint16(b[2*i:]))
		} else {
			r = rune(binary.LittleEndian.Uint32(b[4*i:]))
		}
		if !utf8.ValidRune(r) {
			r = utf8.RuneError
		}
		rs = append(rs, r)
	}
	return string(rs), nil
}

// line is the source line of the instruction at offset instr (code units).
func (c *pyCode) line(minor int, instr uint32) int {
	if minor == 10 {
		return lineTable310(c.table, c.firstLine, int(instr)*2)
	}
	return locationTable(c.table, c.firstLine, int(instr))
}

// lineTable310 reads 3.10's co_linetable: (bytes of code, signed line
// delta) pairs, a delta of -128 meaning no line; at is a byte offset.
func lineTable310(tab []byte, first, at int) int {
	line, addr := first, 0
	for i := 0; i+1 < len(tab); i += 2 {
		end := addr + int(tab[i])
		d := int(int8(tab[i+1]))
		cur := 0
		if d != -128 {
			line += d
			cur = line
		}
		if at >= addr && at < end {
			return cur
		}
		addr = end
	}
	return 0
}

// locationTable reads the location table of 3.11+ (CPython's
// Objects/locations.md): entries of 1 to 8 code units, each starting
// with a byte whose top bit is set, bits 3-6 its form and bits 0-2 its
// length less one; at is an offset in code units.
func locationTable(tab []byte, first, at int) int {
	line, addr, i := first, 0, 0
	varint := func() int {
		v, shift := 0, 0
		for i < len(tab) {
			b := tab[i]
			i++
			v |= int(b&63) << shift
			shift += 6
			if b&64 == 0 {
				break
			}
		}
		return v
	}
	svarint := func() int {
		v := varint()
		if v&1 != 0 {
			return -(v >> 1)
		}
		return v >> 1
	}
	for i < len(tab) {
		b := tab[i]
		i++
		code, n := int(b>>3&15), int(b&7)+1
		cur := line
		switch {
		case code == 15: // no location
			cur = 0
		case code == 14: // long form: line delta, end line delta, columns
			line += svarint()
			cur = line
			varint()
			varint()
			varint()
		case code == 13: // no column
			line += svarint()
			cur = line
		case code >= 10: // one-line forms: line delta, two column bytes
			line += code - 10
			cur = line
			i += 2
		default: // short form: same line, one column byte
			i++
		}
		if at >= addr && at < addr+n {
			return cur
		}
		addr += n
	}
	return 0
}
