package tracer

import (
	"testing"

	"github.com/memtrace/memtrace/internal/allocator"
	"github.com/memtrace/memtrace/internal/event"
)

// The JVM's category probes never get a return probe (the JVM unwinds
// through os::malloc's callers), and their cookie carries the category's
// argument and the code's length from the probe on.
func TestJVMProbeRoles(t *testing.T) {
	tests := []struct {
		p      Placement
		ret    bool
		cookie uint64
	}{
		{Placement{Probe: allocator.Probe{Func: event.FuncMalloc}}, true, uint64(event.FuncMalloc)},
		{Placement{Probe: allocator.Probe{Func: event.FuncFree}}, false, uint64(event.FuncFree)},
		{Placement{Probe: allocator.Probe{CategoryArg: 2, Size: 0x150}}, false, 2 | 0x150<<32},
		{Placement{Probe: allocator.Probe{CategoryArg: 3, Size: 0x50}, Skip: 4}, false, 3 | 0x4c<<32},
		{Placement{Probe: allocator.Probe{CategoryArg: 2, Func: event.FuncMalloc}}, false, 2},
	}
	for _, tt := range tests {
		if got := needsReturn(tt.p); got != tt.ret {
			t.Errorf("needsReturn(%+v) = %v", tt.p, got)
		}
		if got := cookie(tt.p); got != tt.cookie {
			t.Errorf("cookie(%+v) = %#x, want %#x", tt.p, got, tt.cookie)
		}
	}
	if n := arity(allocator.Probe{CategoryArg: 3}); n != 3 {
		t.Errorf("arity of a category probe on argument 3 = %d", n)
	}
}

// pymalloc's pool helper gets a return probe (the pool is its return
// value's) and reads no argument; its cookie carries the pool size's log2
// (FUNC_COOKIE_POOL_SHIFT), on both the entry and the session program.
func TestPoolProbeRole(t *testing.T) {
	p := Placement{Probe: allocator.Probe{Func: event.FuncPyPool, PoolSize: 16 << 10, Size: 0x40}}
	want := uint64(event.FuncPyPool) | 14<<memtraceFuncCookieFUNC_COOKIE_POOL_SHIFT
	if !needsReturn(p) {
		t.Error("the pool helper has no return probe")
	}
	if got := cookie(p); got != want {
		t.Errorf("cookie = %#x, want %#x", got, want)
	}
	if got := sessionCookie(p); got != want|0x40<<memtraceFuncCookieFUNC_COOKIE_LEN_SHIFT {
		t.Errorf("session cookie = %#x, want %#x", got, want|0x40<<memtraceFuncCookieFUNC_COOKIE_LEN_SHIFT)
	}
	if n := arity(p.Probe); n != 0 {
		t.Errorf("arity = %d, want 0", n)
	}
}
