package main

import (
	"errors"

	"github.com/memtrace/memtrace/allocator"
	"github.com/memtrace/memtrace/launch"
	"github.com/memtrace/memtrace/tracer"
)

// Exit codes, documented in README.md. In `--` mode memtrace otherwise exits
// with the command's own status (128+N when a signal N ended it).
const (
	exitOK          = 0
	exitError       = 1 // tracing failed after it started
	exitUsage       = 2
	exitPermission  = 3 // not root / no CAP_BPF
	exitKernel      = 4 // no BTF, no uprobes, BPF refused
	exitNoProcess   = 5
	exitNoAllocator = 6
	exitNotExec     = 126
	exitNotFound    = 127
)

// errUsage marks command-line mistakes.
var errUsage = errors.New("usage")

func exitCodeFor(err error) int {
	switch {
	case err == nil:
		return exitOK
	case errors.Is(err, errUsage):
		return exitUsage
	case errors.Is(err, tracer.ErrPermission):
		return exitPermission
	case errors.Is(err, tracer.ErrNoBTF), errors.Is(err, tracer.ErrNoUprobes), errors.Is(err, tracer.ErrOldKernel):
		return exitKernel
	case errors.Is(err, allocator.ErrNoProcess), errors.Is(err, tracer.ErrProcessGone):
		return exitNoProcess
	case errors.Is(err, allocator.ErrNotFound):
		return exitNoAllocator
	case errors.Is(err, launch.ErrNotFound):
		return exitNotFound
	case errors.Is(err, launch.ErrNotExecutable):
		return exitNotExec
	}
	return exitError
}
