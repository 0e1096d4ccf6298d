package pipeline

import "errors"

// Exit codes, documented in docs/cli.md. In `--` mode memtrace otherwise exits
// with the command's own status (128+N when a signal N ended it).
const (
	ExitOK          = 0
	ExitError       = 1 // tracing failed after it started
	ExitUsage       = 2
	ExitPermission  = 3 // not root / no CAP_BPF
	ExitKernel      = 4 // no BTF, no uprobes, BPF refused
	ExitNoProcess   = 5 // no such process, or a kernel thread (-p 2)
	ExitNoAllocator = 6
	ExitNotExec     = 126
	ExitNotFound    = 127
)

// ErrUsage marks command-line mistakes.
var ErrUsage = errors.New("usage")
