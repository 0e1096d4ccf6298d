package main

import (
	"github.com/memtrace/memtrace/internal/pipeline"
	"github.com/memtrace/memtrace/internal/replay"
)

// The exit codes the command line and its tests use (pipeline defines and
// documents them all).
const (
	exitOK          = pipeline.ExitOK
	exitError       = pipeline.ExitError
	exitUsage       = pipeline.ExitUsage
	exitPermission  = pipeline.ExitPermission
	exitKernel      = pipeline.ExitKernel
	exitNoProcess   = pipeline.ExitNoProcess
	exitNoAllocator = pipeline.ExitNoAllocator
	exitLeak        = pipeline.ExitLeak
	exitGrowth      = replay.ExitGrowth
	exitNotExec     = pipeline.ExitNotExec
	exitNotFound    = pipeline.ExitNotFound
)

// errUsage marks command-line mistakes.
var errUsage = pipeline.ErrUsage
