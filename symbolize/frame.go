package symbolize

// Frame is one resolved code address. Fields that could not be resolved are
// left empty (Line 0); Module is empty only when the address lies in no
// known mapping.
type Frame struct {
	// Address is the address that was resolved, as the process saw it.
	Address uint64
	// Function is the demangled function name, "" when unknown.
	Function string
	// File and Line locate the instruction (for a call site, the call).
	File string
	Line int
	// Module is the path of the mapped file holding Address.
	Module string
	// Offset is Address relative to the module's load bias (the ELF virtual
	// address), useful with addr2line when nothing else resolved.
	Offset uint64
}
