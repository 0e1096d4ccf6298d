package main

import (
	"github.com/memtrace/memtrace/replay"
	"github.com/memtrace/memtrace/session"
)

// The exit codes the command line and its tests use (session defines and
// documents them all).
const (
	exitOK          = session.ExitOK
	exitError       = session.ExitError
	exitUsage       = session.ExitUsage
	exitPermission  = session.ExitPermission
	exitKernel      = session.ExitKernel
	exitNoProcess   = session.ExitNoProcess
	exitNoAllocator = session.ExitNoAllocator
	exitLeak        = session.ExitLeak
	exitGrowth      = replay.ExitGrowth
	exitNotExec     = session.ExitNotExec
	exitNotFound    = session.ExitNotFound
)

// errUsage marks command-line mistakes.
var errUsage = session.ErrUsage
