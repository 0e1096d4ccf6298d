package unwind

import (
	"bytes"
	"errors"
	"fmt"
	"math"
)

// DWARF register numbers on x86-64 (System V psABI, figure 3.36).
const (
	regRBP = 6
	regRSP = 7
	regRIP = 16
)

// ruleKind is how a register's value in the caller is found.
type ruleKind uint8

const (
	ruleUnset     ruleKind = iota // never mentioned: same value, by GCC's convention
	ruleUndefined                 // DW_CFA_undefined
	ruleSame                      // DW_CFA_same_value
	ruleOffset                    // saved at CFA+off
	ruleOther                     // val_offset, register, expressions: not representable
	ruleExprBreg                  // DW_CFA_expression DW_OP_breg<reg> off: saved at reg+off
)

type regRule struct {
	kind ruleKind
	off  int64
	reg  uint8 // ruleExprBreg's base register
}

// cfaKind is how the CFA is computed.
type cfaKind uint8

const (
	cfaNone cfaKind = iota // not defined yet, or made invalid
	cfaReg                 // register + offset
	cfaExpr                // DWARF expression
)

type cfaRule struct {
	kind cfaKind
	reg  uint64
	off  int64
	expr []byte
}

// regState is the part of a CFI row this package tracks: the CFA, rbp and
// the return address column. Other registers do not matter to a stack
// walker that only needs the CFA, the return address and rbp.
type regState struct {
	cfa    cfaRule
	rbp    regRule
	ra     regRule
	broken bool // an instruction could not be interpreted: no rule from here on
}

// maxStateDepth bounds DW_CFA_remember_state nesting; real code nests one
// or two deep, and malformed input must not allocate without bound.
const maxStateDepth = 64

// program interprets one FDE's CFA instructions after its CIE's initial ones.
type program struct {
	cie     *cie
	sec     frameSection
	initial regState // after the CIE's instructions: the target of DW_CFA_restore
	state   regState
	stack   []regState
	loc     uint64
	end     uint64
	rows    []locRow
}

// locRow is the state in effect from loc on.
type locRow struct {
	loc   uint64
	state regState
}

var errBadInstruction = errors.New("bad CFA instruction")

// fdeRows returns the rows of one FDE: the state at the FDE's start and at
// every location where it changes, all within [start, end). An instruction
// that cannot be interpreted ends the program with a broken row at its
// location: earlier rows are right, later ones unknown. The result is valid
// until the next call: one program serves all FDEs of a section, so that
// its buffers are allocated once.
func (p *program) fdeRows(f fde) []locRow {
	*p = program{sec: p.sec, cie: f.cie, loc: f.start, end: f.end, stack: p.stack[:0], rows: p.rows[:0]}
	if err := p.run(f.cie.initial, true); err != nil {
		p.state = regState{broken: true}
	}
	p.initial = p.state
	p.stack = p.stack[:0]
	if !p.state.broken {
		if err := p.run(f.insns, false); err != nil {
			p.state.broken = true
		}
	}
	p.emit()
	return p.rows
}

// emit records the current state at the current location.
func (p *program) emit() {
	if p.loc >= p.end {
		return
	}
	if n := len(p.rows); n > 0 && p.rows[n-1].loc == p.loc {
		p.rows[n-1].state = p.state
		return
	}
	p.rows = append(p.rows, locRow{loc: p.loc, state: p.state})
}

// advance moves the location by delta code units, emitting the state that
// held before the move.
func (p *program) advance(delta uint64, inCIE bool) error {
	if inCIE || delta == 0 {
		return nil
	}
	if delta > math.MaxUint64/p.cie.codeAlign {
		return errBadInstruction
	}
	d := delta * p.cie.codeAlign
	p.emit()
	if d > math.MaxUint64-p.loc {
		p.loc = math.MaxUint64
	} else {
		p.loc += d
	}
	return nil
}

// rule returns the tracked rule of register reg, or nil for registers
// this package does not track.
func (p *program) rule(st *regState, reg uint64) *regRule {
	switch reg {
	case p.cie.raReg:
		return &st.ra
	case regRBP:
		return &st.rbp
	}
	return nil
}

func (p *program) setRule(reg uint64, r regRule) {
	if dst := p.rule(&p.state, reg); dst != nil {
		*dst = r
	}
}

// restore gives reg back the rule it had after the CIE's instructions.
func (p *program) restore(reg uint64, inCIE bool) {
	if inCIE {
		p.setRule(reg, regRule{})
		return
	}
	if src := p.rule(&p.initial, reg); src != nil {
		p.setRule(reg, *src)
	}
}

// DW_CFA_* opcodes (DWARF 5, section 6.4.2, and GNU extensions).
const (
	cfaAdvanceLoc           = 0x40
	cfaOffset               = 0x80
	cfaRestore              = 0xc0
	cfaNop                  = 0x00
	cfaSetLoc               = 0x01
	cfaAdvanceLoc1          = 0x02
	cfaAdvanceLoc2          = 0x03
	cfaAdvanceLoc4          = 0x04
	cfaOffsetExtended       = 0x05
	cfaRestoreExtended      = 0x06
	cfaUndefined            = 0x07
	cfaSameValue            = 0x08
	cfaRegister             = 0x09
	cfaRememberState        = 0x0a
	cfaRestoreState         = 0x0b
	cfaDefCFA               = 0x0c
	cfaDefCFARegister       = 0x0d
	cfaDefCFAOffset         = 0x0e
	cfaDefCFAExpression     = 0x0f
	cfaExpression           = 0x10
	cfaOffsetExtendedSf     = 0x11
	cfaDefCFASf             = 0x12
	cfaDefCFAOffsetSf       = 0x13
	cfaValOffset            = 0x14
	cfaValOffsetSf          = 0x15
	cfaValExpression        = 0x16
	cfaGNUArgsSize          = 0x2e
	cfaGNUNegOffsetExtended = 0x2f
)

// run interprets instructions. In a CIE (inCIE) location changes are
// ignored: the initial instructions describe the state at every FDE's start.
func (p *program) run(insns []byte, inCIE bool) error {
	r := reader{buf: insns}
	for !r.empty() && p.loc < p.end {
		op := r.u8()
		var err error
		switch op & 0xc0 {
		case cfaAdvanceLoc:
			err = p.advance(uint64(op&0x3f), inCIE)
		case cfaOffset:
			p.setRule(uint64(op&0x3f), p.offsetRule(int64(r.uleb())))
		case cfaRestore:
			p.restore(uint64(op&0x3f), inCIE)
		default:
			err = p.extended(op, &r, inCIE)
		}
		if r.err != nil {
			return r.err
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// offsetRule is the rule "saved at CFA + factored*data_align".
func (p *program) offsetRule(factored int64) regRule {
	off, ok := mulOK(factored, p.cie.dataAlign)
	if !ok {
		return regRule{kind: ruleOther}
	}
	return regRule{kind: ruleOffset, off: off}
}

// mulOK multiplies without silent overflow.
func mulOK(a, b int64) (int64, bool) {
	if a == 0 || b == 0 {
		return 0, true
	}
	c := a * b
	if c/b != a || (a == -1 && b == math.MinInt64) || (b == -1 && a == math.MinInt64) {
		return 0, false
	}
	return c, true
}

func (p *program) extended(op uint8, r *reader, inCIE bool) error {
	st := &p.state
	switch op {
	case cfaNop:
	case cfaSetLoc:
		enc := p.cie.fdeEnc
		if !p.sec.eh && !p.cie.hasAugLen {
			enc = peAbsptr
		}
		// The field's section offset is unknown here, so pc-relative
		// set_loc cannot be resolved; GCC never emits set_loc on x86-64.
		if enc&0x70 == pePcrel {
			return fmt.Errorf("%w pc-relative DW_CFA_set_loc", errUnsupported)
		}
		loc, err := readPointer(r, p.sec, enc, p.cie.addrSize, 0, false)
		if err != nil {
			return err
		}
		if inCIE {
			return nil
		}
		if loc < p.loc {
			return errBadInstruction
		}
		p.emit()
		p.loc = loc
	case cfaAdvanceLoc1:
		return p.advance(uint64(r.u8()), inCIE)
	case cfaAdvanceLoc2:
		return p.advance(uint64(r.u16()), inCIE)
	case cfaAdvanceLoc4:
		return p.advance(uint64(r.u32()), inCIE)
	case cfaOffsetExtended:
		reg := r.uleb()
		p.setRule(reg, p.offsetRule(int64(r.uleb())))
	case cfaOffsetExtendedSf:
		reg := r.uleb()
		p.setRule(reg, p.offsetRule(r.sleb()))
	case cfaGNUNegOffsetExtended:
		reg := r.uleb()
		p.setRule(reg, p.offsetRule(-int64(r.uleb())))
	case cfaRestoreExtended:
		p.restore(r.uleb(), inCIE)
	case cfaUndefined:
		p.setRule(r.uleb(), regRule{kind: ruleUndefined})
	case cfaSameValue:
		p.setRule(r.uleb(), regRule{kind: ruleSame})
	case cfaRegister:
		reg := r.uleb()
		r.uleb()
		p.setRule(reg, regRule{kind: ruleOther})
	case cfaValOffset:
		reg := r.uleb()
		r.uleb()
		p.setRule(reg, regRule{kind: ruleOther})
	case cfaValOffsetSf:
		reg := r.uleb()
		r.sleb()
		p.setRule(reg, regRule{kind: ruleOther})
	case cfaRememberState:
		if len(p.stack) >= maxStateDepth {
			return errBadInstruction
		}
		p.stack = append(p.stack, *st)
	case cfaRestoreState:
		n := len(p.stack)
		if n == 0 {
			return errBadInstruction
		}
		*st = p.stack[n-1]
		p.stack = p.stack[:n-1]
	case cfaDefCFA:
		reg := r.uleb()
		off := r.uleb()
		st.cfa = cfaRule{kind: cfaReg, reg: reg, off: int64(off)}
		if off > math.MaxInt64 {
			st.cfa = cfaRule{}
		}
	case cfaDefCFASf:
		reg := r.uleb()
		off, ok := mulOK(r.sleb(), p.cie.dataAlign)
		st.cfa = cfaRule{kind: cfaReg, reg: reg, off: off}
		if !ok {
			st.cfa = cfaRule{}
		}
	case cfaDefCFARegister:
		reg := r.uleb()
		if st.cfa.kind != cfaReg {
			// Only meaningful after a register rule.
			st.cfa = cfaRule{}
		} else {
			st.cfa.reg = reg
		}
	case cfaDefCFAOffset:
		off := r.uleb()
		if st.cfa.kind != cfaReg || off > math.MaxInt64 {
			st.cfa = cfaRule{}
		} else {
			st.cfa.off = int64(off)
		}
	case cfaDefCFAOffsetSf:
		off, ok := mulOK(r.sleb(), p.cie.dataAlign)
		if st.cfa.kind != cfaReg || !ok {
			st.cfa = cfaRule{}
		} else {
			st.cfa.off = off
		}
	case cfaDefCFAExpression:
		n := r.uleb()
		expr := r.take(int(min(n, uint64(len(r.buf)+1))))
		st.cfa = cfaRule{kind: cfaExpr, expr: expr}
	case cfaExpression:
		reg := r.uleb()
		n := r.uleb()
		expr := r.take(int(min(n, uint64(len(r.buf)+1))))
		rule := regRule{kind: ruleOther}
		for _, base := range []uint8{regRBP, regRSP} {
			if off, ok := bregOnly(expr, base); ok {
				rule = regRule{kind: ruleExprBreg, off: off, reg: base}
			}
		}
		p.setRule(reg, rule)
	case cfaValExpression:
		reg := r.uleb()
		n := r.uleb()
		r.take(int(min(n, uint64(len(r.buf)+1))))
		p.setRule(reg, regRule{kind: ruleOther})
	case cfaGNUArgsSize:
		// The size of outgoing arguments pushed: a hint for exception
		// landing pads, no effect on the CFA.
		r.uleb()
	default:
		return fmt.Errorf("%w: opcode %#x", errBadInstruction, op)
	}
	return nil
}

// DWARF expression opcodes used by the expressions this package recognizes.
const (
	opDeref = 0x06
	opAnd   = 0x1a
	opPlus  = 0x22
	opShl   = 0x24
	opGe    = 0x2a
	opLit0  = 0x30
	opBreg0 = 0x70
)

// bregOnly reports whether expr is exactly DW_OP_breg<reg> off, and off.
func bregOnly(expr []byte, reg uint8) (int64, bool) {
	if len(expr) < 2 || expr[0] != opBreg0+reg {
		return 0, false
	}
	r := reader{buf: expr[1:]}
	off := r.sleb()
	if r.err != nil || !r.empty() {
		return 0, false
	}
	return off, true
}

// pltExpr returns the threshold N of the PLT's CFA expression
//
//	DW_OP_breg7 (rsp) 8; DW_OP_breg16 (rip) 0; DW_OP_lit15; DW_OP_and;
//	DW_OP_litN; DW_OP_ge; DW_OP_lit3; DW_OP_shl; DW_OP_plus
//
// that is, CFA = rsp + 8 + ((rip & 15) >= N ? 8 : 0): in a 16-byte PLT
// entry the push of the relocation index has happened from offset N on. GNU
// ld writes N = 11 for the lazy PLT and 9 for the IBT PLT (endbr64 first).
func pltExpr(expr []byte) (int, bool) {
	prefix := []byte{opBreg0 + regRSP, 8, opBreg0 + regRIP, 0, opLit0 + 15, opAnd}
	suffix := []byte{opGe, opLit0 + 3, opShl, opPlus}
	if len(expr) != len(prefix)+1+len(suffix) ||
		!bytes.Equal(expr[:len(prefix)], prefix) || !bytes.Equal(expr[len(prefix)+1:], suffix) {
		return 0, false
	}
	lit := expr[len(prefix)]
	if lit < opLit0 || lit > opLit0+15 {
		return 0, false
	}
	return int(lit - opLit0), true
}

// derefExpr returns off if expr is DW_OP_breg<reg> off; DW_OP_deref. With
// rbp it is the CFA rule GCC emits for functions that realign the stack
// through a DRAP register saved below rbp; with rsp, glibc's signal
// trampoline's (the interrupted rsp, saved in the ucontext).
func derefExpr(expr []byte, reg uint8) (int64, bool) {
	if len(expr) < 3 || expr[len(expr)-1] != opDeref {
		return 0, false
	}
	return bregOnly(expr[:len(expr)-1], reg)
}
