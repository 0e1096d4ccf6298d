package session

import (
	"errors"

	"github.com/memtrace/memtrace/allocator"
	"github.com/memtrace/memtrace/launch"
	"github.com/memtrace/memtrace/pipeline"
	"github.com/memtrace/memtrace/tracer"
)

// Exit codes (pipeline), documented in README.md. In `--` mode memtrace
// otherwise exits with the command's own status (128+N when a signal N
// ended it).
const (
	ExitOK          = pipeline.ExitOK
	ExitError       = pipeline.ExitError
	ExitUsage       = pipeline.ExitUsage
	ExitPermission  = pipeline.ExitPermission
	ExitKernel      = pipeline.ExitKernel
	ExitNoProcess   = pipeline.ExitNoProcess
	ExitNoAllocator = pipeline.ExitNoAllocator
	ExitNotExec     = pipeline.ExitNotExec
	ExitNotFound    = pipeline.ExitNotFound
	ExitLeak        = pipeline.ExitLeak
)

// ErrUsage marks command-line mistakes.
var ErrUsage = pipeline.ErrUsage

func exitCodeFor(err error) int {
	switch {
	case err == nil:
		return ExitOK
	case errors.Is(err, ErrUsage):
		return ExitUsage
	case errors.Is(err, tracer.ErrPermission):
		return ExitPermission
	case errors.Is(err, tracer.ErrNoBTF), errors.Is(err, tracer.ErrNoUprobes), errors.Is(err, tracer.ErrOldKernel):
		return ExitKernel
	case errors.Is(err, allocator.ErrNoProcess), errors.Is(err, tracer.ErrProcessGone):
		return ExitNoProcess
	case errors.Is(err, allocator.ErrNotFound):
		return ExitNoAllocator
	case errors.Is(err, launch.ErrNotFound):
		return ExitNotFound
	case errors.Is(err, launch.ErrNotExecutable):
		return ExitNotExec
	}
	return ExitError
}
