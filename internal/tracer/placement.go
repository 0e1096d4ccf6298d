package tracer

import (
	"fmt"

	"golang.org/x/arch/x86/x86asm"
)

// maxSkipped bounds how many instructions, and maxSkippedBytes how many
// bytes, the entry probe may move past. jemalloc's free computes ten
// register-only instructions before its first branch.
const (
	maxSkipped      = 16
	maxSkippedBytes = 64
)

// EntryOffset returns where in a function to place its entry probe (and the
// hook of its return probe), and why.
//
// A uprobe on an instruction the kernel emulates (push, jumps, calls, nop)
// costs about a tenth of one on an instruction it must single-step (test,
// mov, endbr64): glibc's free begins with `test %rdi,%rdi`, CET-built
// libraries begin every function with endbr64. So the probe moves to the
// first emulated instruction of the straight-line entry, provided every
// instruction skipped leaves the argument registers and the stack pointer
// as they were (the probe reads both, and [sp] is the return address) and no
// branch in the function lands inside the skipped bytes. Otherwise: +0.
//
// code holds the function's bytes from its first instruction (its symbol
// size, or less); args is how many integer arguments the function takes
// (the registers the probe reads).
func EntryOffset(code []byte, args int) (int, string) {
	protected := protectedRegs(args)
	off := 0
	for n := 0; n <= maxSkipped && off < len(code) && off <= maxSkippedBytes; n++ {
		if isEndbr64(code[off:]) {
			off += 4
			continue
		}
		inst, err := x86asm.Decode(code[off:], 64)
		if err != nil {
			return 0, fmt.Sprintf("+%d does not decode: %v", off, err)
		}
		if emulated(inst, code[off:]) {
			if off == 0 {
				return 0, fmt.Sprintf("%v is emulated", inst)
			}
			if t, ok := branchInto(code, off); ok {
				return 0, fmt.Sprintf("a branch lands at +%d, inside the skipped prologue", t)
			}
			return off, fmt.Sprintf("%v at +%d is emulated; skipped instructions leave arguments and sp intact", inst, off)
		}
		if !skippable(inst, protected) {
			return 0, fmt.Sprintf("%v at +%d changes arguments, sp or control flow", inst, off)
		}
		off += inst.Len
	}
	return 0, "no emulated instruction in the straight-line entry"
}

func isEndbr64(b []byte) bool {
	return len(b) >= 4 && b[0] == 0xf3 && b[1] == 0x0f && b[2] == 0x1e && b[3] == 0xfa
}

// emulated reports whether the x86 uprobe code executes the instruction
// itself instead of single-stepping a copy.
func emulated(inst x86asm.Inst, b []byte) bool {
	switch inst.Op {
	case x86asm.CALL, x86asm.JMP,
		x86asm.JA, x86asm.JAE, x86asm.JB, x86asm.JBE, x86asm.JE, x86asm.JNE,
		x86asm.JG, x86asm.JGE, x86asm.JL, x86asm.JLE, x86asm.JO, x86asm.JNO,
		x86asm.JP, x86asm.JNP, x86asm.JS, x86asm.JNS:
		_, rel := inst.Args[0].(x86asm.Rel)
		return rel
	case x86asm.PUSH:
		_, reg := inst.Args[0].(x86asm.Reg)
		return reg
	case x86asm.NOP:
		return b[0] == 0x90
	}
	return false
}

// argGroups are the integer argument registers in order (System V x86-64),
// each with its narrower names.
var argGroups = [][]x86asm.Reg{
	{x86asm.RDI, x86asm.EDI, x86asm.DI, x86asm.DIB},
	{x86asm.RSI, x86asm.ESI, x86asm.SI, x86asm.SIB},
	{x86asm.RDX, x86asm.EDX, x86asm.DX, x86asm.DL, x86asm.DH},
	{x86asm.RCX, x86asm.ECX, x86asm.CX, x86asm.CL, x86asm.CH},
	{x86asm.R8, x86asm.R8L, x86asm.R8W, x86asm.R8B},
	{x86asm.R9, x86asm.R9L, x86asm.R9W, x86asm.R9B},
}

// protectedRegs is what a skipped instruction must not write: the first
// args argument registers, and sp.
func protectedRegs(args int) map[x86asm.Reg]bool {
	m := map[x86asm.Reg]bool{x86asm.RSP: true, x86asm.ESP: true, x86asm.SP: true, x86asm.SPB: true}
	for i := 0; i < args && i < len(argGroups); i++ {
		for _, r := range argGroups[i] {
			m[r] = true
		}
	}
	return m
}

// skippable reports whether running the instruction before the probe fires
// changes nothing the probe reads: flags-only comparisons, and moves and
// arithmetic into a register that carries no argument. Such instructions
// still run, natively, before the probe; only the probe point moves. Memory
// operands may be read, never written.
func skippable(inst x86asm.Inst, protected map[x86asm.Reg]bool) bool {
	switch inst.Op {
	case x86asm.TEST, x86asm.CMP:
		return true
	case x86asm.MOV, x86asm.LEA, x86asm.MOVZX, x86asm.MOVSX, x86asm.MOVSXD,
		x86asm.ADD, x86asm.SUB, x86asm.AND, x86asm.OR, x86asm.XOR,
		x86asm.SHL, x86asm.SHR, x86asm.SAR, x86asm.NEG, x86asm.NOT,
		x86asm.INC, x86asm.DEC, x86asm.IMUL:
		if inst.Op == x86asm.IMUL && inst.Args[1] == nil {
			return false // one-operand imul writes rdx:rax
		}
		dst, ok := inst.Args[0].(x86asm.Reg)
		return ok && !protected[dst] && !protected[fullReg(dst)]
	}
	return false
}

// fullReg maps a 32-bit register to its 64-bit register: writing eax
// writes rax.
func fullReg(r x86asm.Reg) x86asm.Reg {
	if r >= x86asm.EAX && r <= x86asm.R15L {
		return r - x86asm.EAX + x86asm.RAX
	}
	return r
}

// branchInto finds a branch in code whose target is in (0, off]: the probe
// would then also fire (or be skipped) on a path that is not the entry.
func branchInto(code []byte, off int) (int, bool) {
	for pc := 0; pc < len(code); {
		inst, err := x86asm.Decode(code[pc:], 64)
		if err != nil {
			pc++
			continue
		}
		if len(inst.Args) > 0 {
			if rel, ok := inst.Args[0].(x86asm.Rel); ok {
				t := pc + inst.Len + int(rel)
				if t > 0 && t <= off {
					return t, true
				}
			}
		}
		pc += inst.Len
	}
	return 0, false
}
