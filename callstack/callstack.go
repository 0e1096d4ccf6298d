// Package callstack turns the raw user stack the probes took at an
// allocation into the frames a person can trust. The kernel walks frame
// pointers; through code built without them (Debian's libc and libstdc++) the
// walk can skip callers or read garbage. So every frame is checked — its
// return address must follow a call instruction, and a direct call must
// target the function of the frame below it — and the stack is cut, and
// marked truncated, at the first frame that fails. Frames are never invented.
package callstack

import (
	"encoding/binary"

	"github.com/memtrace/memtrace/event"
	"github.com/memtrace/memtrace/symbolize"
)

// Code gives what the checks need to know about a process's code.
type Code interface {
	// Resolve symbolizes a return address (see symbolize.Resolver).
	Resolve(pid int, ret uint64) symbolize.Frame
	// FuncStart returns the address of the first instruction of the
	// function containing addr.
	FuncStart(pid int, addr uint64) (uint64, bool)
	// Read returns n bytes of code ending just before addr (so the call
	// instruction that addr returns from is at the end).
	Read(pid int, addr uint64, n int) ([]byte, bool)
	// PLT reports whether addr is in a procedure linkage table stub.
	PLT(pid int, addr uint64) bool
}

// Stack is a checked call stack, innermost (the allocation's caller) first.
type Stack struct {
	Frames []symbolize.Frame
	// Truncated: the stack does not reach a thread's first function, either
	// because a frame could not be unwound (no frame pointers) or because
	// the depth limit was hit.
	Truncated bool
}

// bottoms are the functions a complete user stack ends in. main counts: the
// frames above it are the C runtime's start-up, which Debian's libc does not
// even name (__libc_start_call_main is a local symbol there).
var bottoms = map[string]bool{
	"main": true, "_start": true, "__libc_start_main": true, "__libc_start_call_main": true,
	"start_thread": true, "clone": true, "clone3": true, "__clone": true, "__clone3": true,
}

// Build checks the stack the probes unwound for an allocation: frames holds
// the charged call site, then its callers' return addresses (event.Stack),
// and complete says the unwind reached the thread's outermost frame. Each
// frame after the first must follow a call into the function of the frame
// before it; the stack is cut, and marked truncated, at the first that does
// not. Frames marked event.FrameExact (a signal trampoline and the code the
// signal interrupted) are not return addresses and are not checked. depth
// bounds the frames kept.
func Build(c Code, pid int, frames []uint64, complete bool, depth int) Stack {
	var st Stack
	for i, raw := range frames {
		if len(st.Frames) == depth {
			st.Truncated = true
			return st
		}
		exact := raw&event.FrameExact != 0
		r := raw &^ event.FrameExact
		if exact {
			// Resolve treats its argument as a return address (one past
			// the call): one past the interrupted instruction is that.
			r++
		}
		f := c.Resolve(pid, r)
		if f.Module == "" {
			st.Truncated = true
			return st
		}
		if i > 0 && !exact && !callsInto(c, pid, r, st.Frames[i-1].Address) {
			st.Truncated = true
			return st
		}
		st.Frames = append(st.Frames, f)
		if bottoms[f.Function] {
			return st
		}
	}
	st.Truncated = !complete
	return st
}

// callsInto reports whether the instruction before ret is a call that could
// have entered the function holding callee (a return address in it).
func callsInto(c Code, pid int, ret, callee uint64) bool {
	code, ok := c.Read(pid, ret, 7)
	if !ok || len(code) != 7 {
		return false
	}
	// call rel32: the target is known, so it must be the callee's function
	// (or a PLT stub, which jumps on to another module).
	if code[2] == 0xe8 {
		target := ret + uint64(int64(int32(binary.LittleEndian.Uint32(code[3:]))))
		if c.PLT(pid, target) {
			return true
		}
		start, ok := c.FuncStart(pid, callee)
		return !ok || start == target
	}
	return indirectCall(code)
}

// indirectCall recognizes the encodings of call r/m64 (FF /2) that end
// exactly at the return address: the target is not known statically.
func indirectCall(b []byte) bool {
	return len(symbolize.IndirectCallStarts(b)) > 0
}
