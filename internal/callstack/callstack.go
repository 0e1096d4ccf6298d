// Package callstack turns the user stack the probes unwound at an
// allocation into the frames a person can trust. The probes follow each
// file's unwind tables (or frame pointers where a file has none); a wrong
// table or garbage in a frame-pointer walk would give a wrong caller. So
// every frame is checked — its return address must follow a call
// instruction — and the stack is cut, and marked truncated, at the first
// frame that fails (JIT code, which no file holds, passes when its
// runtime's perf map names it). Frames are never invented.
package callstack

import (
	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/symbolize"
)

// Code gives what the checks need to know about a process's code.
type Code interface {
	// Resolve symbolizes a return address (see symbolize.Resolver).
	Resolve(pid int, ret uint64) symbolize.Frame
	// Read returns n bytes of code ending just before addr (so the call
	// instruction that addr returns from is at the end).
	Read(pid int, addr uint64, n int) ([]byte, bool)
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
	"Py_BytesMain": true, // CPython's main: the program's stack (its <module>) is above it
}

// Build checks the stack the probes unwound for an allocation: frames holds
// the charged call site, then its callers' return addresses (event.Stack),
// and complete says the unwind reached the thread's outermost frame. Each
// frame after the first must follow a call into the function of the frame
// before it; the stack is cut, and marked truncated, at the first that does
// not. Frames marked event.FrameExact (a signal trampoline and the code the
// signal interrupted) are not return addresses and are not checked. depth
// bounds the native frames kept (Python frames, read apart, come on top).
func Build(c Code, pid int, frames []uint64, complete bool, depth int) Stack {
	var st Stack
	native := 0 // Python frames (symbolize.IsPython) come on top of depth
	skipped := false
	for i, raw := range frames {
		if native == depth && !symbolize.IsPython(raw) {
			// Past depth, the Python frames still come: the native
			// frames between them are left out (the stack is truncated).
			st.Truncated, skipped = true, true
			if !hasPython(frames[i:]) {
				return st
			}
			continue
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
		// JIT code is no file to read the call from; that the runtime's
		// map names a function at the address is the check. A Python
		// frame (symbolize.IsPython) was read from the interpreter's
		// frames, not unwound: no call to check.
		if i > 0 && !exact && !f.JIT && !f.Python && !followsCall(c, pid, r) {
			st.Truncated = true
			return st
		}
		st.Frames = append(st.Frames, f)
		if i == 0 && f.Module == symbolize.ExecveModule {
			return st // execve's own writes: no user code made them, the stack is whole
		}
		if !f.Python {
			native++
		}
		if !f.Python && bottoms[f.Function] {
			return st
		}
	}
	st.Truncated = skipped || !complete
	return st
}

func hasPython(frames []uint64) bool {
	for _, f := range frames {
		if symbolize.IsPython(f) {
			return true
		}
	}
	return false
}

// followsCall reports whether the instruction before ret is a call: a
// direct one (E8 rel32; its target need not be the frame below's function,
// which may have been reached by a tail call) or an indirect one.
func followsCall(c Code, pid int, ret uint64) bool {
	code, ok := c.Read(pid, ret, 7)
	if !ok || len(code) != 7 {
		return false
	}
	return code[2] == 0xe8 || indirectCall(code)
}

// indirectCall recognizes the encodings of call r/m64 (FF /2) that end
// exactly at the return address: the target is not known statically.
func indirectCall(b []byte) bool {
	return len(symbolize.IndirectCallStarts(b)) > 0
}
