package symbolize

import (
	"cmp"
	"debug/dwarf"
	"slices"
	"sync"
	"sync/atomic"
)

// Inline chains come from DWARF: a function's code (DW_TAG_subprogram with
// an address range) holds DW_TAG_inlined_subroutine entries, nested as the
// calls were, each with its address ranges, the function it inlines
// (DW_AT_abstract_origin) and the place of the call it replaces
// (DW_AT_call_file, DW_AT_call_line). Reading a unit's entries costs far
// more than its line program. Both are read per unit, when an address in
// it is first asked for, once.

// dwarfInfo is one module's DWARF: its compile units' line rows by
// address (lines.go), and its compile units by address for the inline
// chains.
type dwarfInfo struct {
	src       *dwarfSource
	lineUnits []*unitLines // in .debug_info's order; nil when lineTab holds all rows
	lineSeqs  []lineSeq    // their sequences, sorted by lo
	lineTab   *lineTable
	infoSize  uint64
	units     []*unitInline
	spans     []unitSpan // sorted by lo
}

// unitSpan is one address range of a compile unit.
type unitSpan struct {
	lo, hi uint64
	unit   int32
}

// maxUnitSpans bounds the ranges kept: a real module has one to a few per
// unit.
const maxUnitSpans = 1 << 24

// unitInline is one compile unit's inlined code, read on first use.
type unitInline struct {
	offset  dwarf.Offset
	linesOK bool // its line program header passed checkLineHeader

	once   sync.Once
	nodes  []inlineNode
	segs   []inlineSeg
	pretty []atomic.Pointer[string]
}

// inlineNode is a function's code (not inlined) or one inlined call in it.
type inlineNode struct {
	parent   int32 // the enclosing node, -1 for none
	inlined  bool
	callLine int32
	name     string // as DWARF gives it, mangled or not
	callFile string
}

// inlineSeg says that [lo, hi) is code of node and of no node inside it.
type inlineSeg struct {
	lo, hi uint64
	node   int32
}

// addUnit notes a compile unit and its ranges.
func (dw *dwarfInfo) addUnit(d *dwarf.Data, cu *dwarf.Entry, linesOK bool) {
	ranges, _ := safeRanges(d, cu)
	if len(ranges) == 0 {
		return
	}
	i := int32(len(dw.units))
	dw.units = append(dw.units, &unitInline{offset: cu.Offset, linesOK: linesOK})
	for _, r := range ranges {
		if len(dw.spans) >= maxUnitSpans {
			return
		}
		if r[0] != 0 && r[0] < r[1] { // 0: code the linker discarded
			dw.spans = append(dw.spans, unitSpan{lo: r[0], hi: r[1], unit: i})
		}
	}
}

func (dw *dwarfInfo) sortUnits() {
	slices.SortFunc(dw.spans, func(a, b unitSpan) int { return cmp.Compare(a.lo, b.lo) })
}

// safeRanges is dwarf.Data.Ranges, which can panic on malformed input.
func safeRanges(d *dwarf.Data, e *dwarf.Entry) (r [][2]uint64, err error) {
	defer func() {
		if recover() != nil {
			r, err = nil, errMalformed
		}
	}()
	return d.Ranges(e)
}

type malformedError struct{}

func (malformedError) Error() string { return "malformed DWARF" }

var errMalformed error = malformedError{}

// inlineAt finds the innermost inlined call holding pc: its unit and node.
func (dw *dwarfInfo) inlineAt(pc uint64) (*unitInline, int32) {
	if dw == nil {
		return nil, -1
	}
	i := searchLast(len(dw.spans), func(i int) bool { return dw.spans[i].lo <= pc })
	// Spans of units may overlap in odd files: look back a little.
	for k := 0; i >= 0 && k < 4; i, k = i-1, k+1 {
		s := dw.spans[i]
		if pc >= s.hi {
			continue
		}
		u := dw.units[s.unit]
		u.once.Do(func() { dw.readInlines(u) })
		j := searchLast(len(u.segs), func(j int) bool { return u.segs[j].lo <= pc })
		if j >= 0 && pc < u.segs[j].hi {
			return u, u.segs[j].node
		}
		return nil, -1
	}
	return nil, -1
}

// maxInlineDepth bounds a chain: real ones are a handful deep.
const maxInlineDepth = 64

// chain builds the inline chain of node: the innermost function at
// file:line, then each enclosing function at the line of its inlined call,
// ending with the function the code belongs to, named fn when known (as
// the symbol table names it).
func (u *unitInline) chain(node int32, file string, line int, fn string) []InlineFrame {
	out := make([]InlineFrame, 0, 4)
	f := InlineFrame{Function: u.name(node), File: file, Line: line}
	for cur := node; ; {
		out = append(out, f)
		nd := &u.nodes[cur]
		if !nd.inlined || len(out) >= maxInlineDepth {
			if fn != "" {
				out[len(out)-1].Function = fn
			}
			break
		}
		f = InlineFrame{Function: fn, File: nd.callFile, Line: int(nd.callLine)}
		if nd.parent < 0 {
			out = append(out, f)
			break
		}
		cur = nd.parent
		f.Function = u.name(cur)
	}
	return out
}

// name is node i's demangled name, demangled once.
func (u *unitInline) name(i int32) string {
	if p := u.pretty[i].Load(); p != nil {
		return *p
	}
	n := demangleName(u.nodes[i].name)
	u.pretty[i].Store(&n)
	return n
}

// readInlines reads the unit's entries. A malformed unit yields what was
// read before the fault, or nothing.
func (dw *dwarfInfo) readInlines(u *unitInline) {
	_ = guard("read inlined code", func() error {
		nodes, segs := dw.unitInlines(u)
		u.nodes, u.segs = nodes, segs
		return nil
	})
	u.pretty = make([]atomic.Pointer[string], len(u.nodes))
}

func (dw *dwarfInfo) unitInlines(u *unitInline) ([]inlineNode, []inlineSeg) {
	d, err := dw.src.data(u.offset)
	if err != nil {
		return nil, nil
	}
	r := d.Reader()
	r.Seek(u.offset)
	cu, err := r.Next()
	if err != nil || cu == nil || !cu.Children {
		return nil, nil
	}
	var files []*dwarf.LineFile
	if u.linesOK {
		if lr, err := d.LineReader(cu); err == nil && lr != nil {
			files = lr.Files()
		}
	}
	names := &nameCache{src: dw.src, byOffset: map[dwarf.Offset]string{}}

	type rng struct {
		lo, hi uint64
		node   int32
		depth  int32
	}
	var nodes []inlineNode
	var origins []dwarf.Offset // per node, the function it is code of (while reading)
	var rngs []rng
	stack := []int32{-1} // per open entry, the innermost node around it
	for steps := uint64(0); steps <= dw.infoSize; steps++ {
		e, err := r.Next()
		if err != nil || e == nil {
			break
		}
		if e.Tag == 0 {
			stack = stack[:len(stack)-1]
			if len(stack) == 0 {
				break
			}
			continue
		}
		if e.Tag == dwarf.TagCompileUnit || e.Tag == dwarf.TagPartialUnit || e.Tag == dwarf.TagTypeUnit {
			break // ran into the next unit: this one lacked its end marker
		}
		self := stack[len(stack)-1]
		if e.Tag == dwarf.TagInlinedSubroutine && self >= 0 && names.splitBack(e, origins[self]) {
			// Its code is its parent's, and so are the calls inlined in it.
			if e.Children {
				stack = append(stack, self)
			}
			continue
		}
		if e.Tag == dwarf.TagSubprogram || e.Tag == dwarf.TagInlinedSubroutine {
			if ranges, _ := safeRanges(d, e); len(ranges) > 0 {
				n := inlineNode{parent: self, inlined: e.Tag == dwarf.TagInlinedSubroutine, name: names.of(e)}
				if n.inlined {
					if i, ok := e.Val(dwarf.AttrCallFile).(int64); ok && i >= 0 && i < int64(len(files)) && files[i] != nil {
						n.callFile = files[i].Name
					}
					if l, ok := e.Val(dwarf.AttrCallLine).(int64); ok && l > 0 && l < 1<<31 {
						n.callLine = int32(l)
					}
				}
				self = int32(len(nodes))
				nodes = append(nodes, n)
				origins = append(origins, originOf(e))
				for _, rg := range ranges {
					if rg[0] != 0 && rg[0] < rg[1] {
						rngs = append(rngs, rng{lo: rg[0], hi: rg[1], node: self, depth: int32(len(stack))})
					}
				}
			}
		}
		if e.Children {
			stack = append(stack, self)
		}
	}

	// Flatten the nested ranges into disjoint segments, each owned by the
	// innermost node covering it: outer ranges first at equal starts.
	slices.SortFunc(rngs, func(a, b rng) int {
		if c := cmp.Compare(a.lo, b.lo); c != 0 {
			return c
		}
		if c := cmp.Compare(a.depth, b.depth); c != 0 {
			return c
		}
		return cmp.Compare(b.hi, a.hi)
	})
	var segs []inlineSeg
	emit := func(lo, hi uint64, node int32) {
		if lo >= hi || !nodes[node].inlined {
			return // code of a function itself needs no segment
		}
		if n := len(segs); n > 0 && segs[n-1].node == node && segs[n-1].hi == lo {
			segs[n-1].hi = hi
			return
		}
		segs = append(segs, inlineSeg{lo: lo, hi: hi, node: node})
	}
	type open struct {
		hi   uint64
		node int32
	}
	var st []open
	cursor := uint64(0)
	closeUntil := func(x uint64) {
		for len(st) > 0 && st[len(st)-1].hi <= x {
			top := st[len(st)-1]
			st = st[:len(st)-1]
			if top.hi > cursor {
				emit(cursor, top.hi, top.node)
				cursor = top.hi
			}
		}
	}
	for _, rg := range rngs {
		closeUntil(rg.lo)
		if len(st) > 0 && rg.lo > cursor {
			emit(cursor, rg.lo, st[len(st)-1].node)
		}
		cursor = max(cursor, rg.lo)
		st = append(st, open{hi: rg.hi, node: rg.node})
	}
	closeUntil(^uint64(0))
	return nodes, segs
}

// attrMIPSLinkageName is DW_AT_MIPS_linkage_name, which older GCCs emit
// instead of DW_AT_linkage_name.
const attrMIPSLinkageName dwarf.Attr = 0x2007

// nameCache names functions, following DW_AT_abstract_origin and
// DW_AT_specification (an inlined call names its function only through
// its abstract instance, a C++ method through its declaration in the
// class), preferring the linkage name, which demangles to the qualified
// name with parameters, as symbols do.
type nameCache struct {
	src      *dwarfSource
	byOffset map[dwarf.Offset]string
	decls    map[dwarf.Offset]place // where origins are declared (splitBack)
}

func (c *nameCache) of(e *dwarf.Entry) string {
	plain := ""
	var visited []dwarf.Offset
	for hops := 0; e != nil && hops < 8; hops++ {
		if n, ok := c.byOffset[e.Offset]; ok && hops > 0 {
			return c.remember(visited, n)
		}
		visited = append(visited, e.Offset)
		for _, a := range []dwarf.Attr{dwarf.AttrLinkageName, attrMIPSLinkageName} {
			if n, ok := e.Val(a).(string); ok && n != "" {
				return c.remember(visited, n)
			}
		}
		if n, ok := e.Val(dwarf.AttrName).(string); ok && n != "" && plain == "" {
			plain = n
		}
		off, ok := e.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset)
		if !ok {
			off, ok = e.Val(dwarf.AttrSpecification).(dwarf.Offset)
		}
		if !ok {
			break
		}
		d, err := c.src.data(off)
		if err != nil {
			break
		}
		r := d.Reader()
		r.Seek(off)
		e, _ = r.Next()
	}
	return c.remember(visited, plain)
}

// originOf is the entry of the function e is code of: its abstract
// origin, or e itself.
func originOf(e *dwarf.Entry) dwarf.Offset {
	if off, ok := e.Val(dwarf.AttrAbstractOrigin).(dwarf.Offset); ok {
		return off
	}
	return e.Offset
}

// splitBack reports whether e, an inlined call inside code of the function
// at parent, is GCC's partial inlining undone. -fpartial-inlining (on from
// -O2) splits f into a head and an outlined tail, f.part.0, whose abstract
// origin is f; the head's call of the tail is given f's own declaration as
// its place. When f is kept out of line and the tail is inlined back into
// it, DWARF shows f inlined into f, called at the line and column that
// declare f: no call in the source, so no frame of the chain.
// A real recursive call inlined into itself is at another place. Files are
// not compared: with LTO the origin is in another unit, whose files are
// numbered otherwise.
func (c *nameCache) splitBack(e *dwarf.Entry, parent dwarf.Offset) bool {
	if originOf(e) != parent {
		return false
	}
	decl, ok := c.declOf(parent)
	if !ok {
		return false
	}
	call := place{}
	call.line, _ = e.Val(dwarf.AttrCallLine).(int64)
	call.column, _ = e.Val(dwarf.AttrCallColumn).(int64)
	return call == decl && call.line > 0
}

// place is a declaration's or a call's line and column (0 when not given).
type place struct{ line, column int64 }

// declOf reads where the function at off is declared, once per function.
func (c *nameCache) declOf(off dwarf.Offset) (place, bool) {
	if p, ok := c.decls[off]; ok {
		return p, true
	}
	d, err := c.src.data(off)
	if err != nil {
		return place{}, false
	}
	r := d.Reader()
	r.Seek(off)
	e, err := r.Next()
	if err != nil || e == nil {
		return place{}, false
	}
	var p place
	p.line, _ = e.Val(dwarf.AttrDeclLine).(int64)
	p.column, _ = e.Val(dwarf.AttrDeclColumn).(int64)
	if c.decls == nil {
		c.decls = map[dwarf.Offset]place{}
	}
	c.decls[off] = p
	return p, true
}

// remember caches n for the entries after the first (origins and
// declarations, shared by many calls).
func (c *nameCache) remember(visited []dwarf.Offset, n string) string {
	for _, off := range visited[min(1, len(visited)):] {
		c.byOffset[off] = n
	}
	return n
}
