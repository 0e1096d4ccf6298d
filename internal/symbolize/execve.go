package symbolize

// The pages execve itself writes: the new program's arguments,
// environment and auxiliary vector, on its new stack. The kernel writes
// them while the task's registers still hold the old program's pc, which
// in the new address space means nothing (or names an unrelated function
// of a program mapped at the same address), so the probes charge them to
// ExecveSite instead (bpf/memtrace.h, FAULT_PC_EXECVE).
const (
	// ExecveSite is the pc the probes charge execve's own writes to: no
	// code is ever mapped at address 1.
	ExecveSite = 1
	// ExecveFunction names that call site in every output.
	ExecveFunction = "[execve: the program's arguments and environment]"
	// ExecveModule is its module: the kernel wrote the pages.
	ExecveModule = "[kernel]"
)

// execveFrame resolves ret when it stands for ExecveSite: the site itself,
// or one past it (a stack's exact first frame, made a return address).
func execveFrame(ret uint64) (Frame, bool) {
	if ret != ExecveSite && ret != ExecveSite+1 {
		return Frame{}, false
	}
	return Frame{Address: ret, CallAddress: ExecveSite, Function: ExecveFunction, Module: ExecveModule}, true
}
