package session

import (
	"strings"

	"github.com/memtrace/memtrace/internal/allocator"
	"github.com/memtrace/memtrace/internal/callstack"
	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/pipeline"
)

// chargeJIT moves an allocation charged to JIT code past the runtime's
// own JIT functions (node's Buffer.alloc, the JDK's allocateDirect) to the
// program's function that called them, by the names in the runtime's perf
// map now. The probes keep a few frames from a charged JIT frame on for
// this (JIT_FRAMES in bpf/), and sampled mode keeps its stack; with
// --detail, rows are whole stacks as unwound. Before the event is
// recorded: a replay charges what the run charged.
func (s *session) chargeJIT(e *event.Event) {
	if s.cfg.Detail || len(e.Stack) < 2 || s.res == nil {
		return
	}
	code := pipeline.CodeView{Resolver: s.res}
	ret, ok, unnamed := callstack.JITCharge(code, int(e.PID), e.Stack, s.runtimeCode)
	if !ok && unnamed && s.jvmPerfMapNow(int(e.PID)) { // --jvm-perfmap: a JVM's newer code (jvm.go)
		ret, ok, _ = callstack.JITCharge(code, int(e.PID), e.Stack, s.runtimeCode)
	}
	if ok {
		e.CallSite = ret
	}
}

// runtimeCode: a runtime's own JIT function, or its native glue between
// JIT frames (V8's embedded builtins, wrappers).
func (s *session) runtimeCode(fn string, jit bool) bool {
	if jit {
		return allocator.RuntimeJIT(fn)
	}
	return strings.HasPrefix(fn, "Builtins_") || s.cfg.WrapperRule.Wraps(fn)
}
