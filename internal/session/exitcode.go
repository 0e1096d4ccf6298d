package session

import (
	"errors"

	"github.com/memtrace/memtrace/internal/allocator"
	"github.com/memtrace/memtrace/internal/host"
	"github.com/memtrace/memtrace/internal/launch"
	"github.com/memtrace/memtrace/internal/pipeline"
	"github.com/memtrace/memtrace/internal/tracer"
)

// exitCodeFor is memtrace's exit code for a live run's error
// (pipeline's codes, documented in docs/cli.md); in `--` mode memtrace
// otherwise exits with the command's own status (128+N when a signal N
// ended it).
func exitCodeFor(err error) int {
	switch {
	case err == nil:
		return pipeline.ExitOK
	case errors.Is(err, pipeline.ErrUsage):
		return pipeline.ExitUsage
	case errors.Is(err, tracer.ErrPermission):
		return pipeline.ExitPermission
	case errors.Is(err, tracer.ErrNoBTF), errors.Is(err, tracer.ErrNoUprobes), errors.Is(err, tracer.ErrOldKernel):
		return pipeline.ExitKernel
	case errors.Is(err, allocator.ErrNoProcess), errors.Is(err, tracer.ErrProcessGone), errors.Is(err, host.ErrKernelThread):
		return pipeline.ExitNoProcess
	case errors.Is(err, allocator.ErrNotFound):
		return pipeline.ExitNoAllocator
	case errors.Is(err, launch.ErrNotFound):
		return pipeline.ExitNotFound
	case errors.Is(err, launch.ErrNotExecutable):
		return pipeline.ExitNotExec
	}
	return pipeline.ExitError
}
