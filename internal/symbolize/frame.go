package symbolize

// Frame is one resolved code address. Fields that could not be resolved are
// left empty (Line 0); Module is empty only when the address lies in no
// known mapping.
type Frame struct {
	// Address is the address that was resolved, as the process saw it: for
	// a call site, the return address, one instruction past the call.
	Address uint64
	// CallAddress is the address of the call instruction that Address
	// returns from, decoded from the code before it (Address-1 when it could
	// not be decoded). 0 when Address lies in no known mapping.
	CallAddress uint64
	// Function is the demangled name of the function whose code holds the
	// call (the symbol), "" when unknown.
	Function string
	// File and Line locate the call instruction.
	File string
	Line int
	// Module is the path of the mapped file holding Address.
	Module string
	// Offset is CallAddress relative to the module's load bias (the ELF
	// virtual address of the call instruction), ready for addr2line. When the
	// module's file could not be read, it is the file offset of Address-1.
	Offset uint64
	// Inlined is set when the call lies in code inlined into Function: the
	// source-level frames that this one machine frame stands for, innermost
	// first. The first names the inlined function that makes the call, at
	// File:Line; each next one the function the previous one was inlined
	// into, at the line of that (inlined) call; the last is Function itself.
	// Empty when the call is not in inlined code. Shared between frames:
	// do not modify.
	Inlined []InlineFrame
	// JIT is set when a runtime's perf map or jitdump named the code
	// (Module is that file, Offset the address's offset in the function).
	JIT bool
	// Python: a Python frame (Address stands for it: IsPython); Function
	// is the code object's qualified name, File its .py path, Module
	// "python".
	Python bool
}

// InlineFrame is one source-level frame of an inline chain.
type InlineFrame struct {
	Function string
	File     string
	Line     int
}
