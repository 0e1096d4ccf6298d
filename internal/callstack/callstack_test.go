package callstack

import (
	"testing"

	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/symbolize"
)

// fakeCode is a tiny address space: functions with starts, and the bytes
// before each return address.
type fakeCode struct {
	funcs  map[uint64]string // return address -> function
	starts map[uint64]uint64 // return address -> function start
	before map[uint64][]byte // return address -> 7 bytes before it
	plt    map[uint64]bool
}

func (f fakeCode) Resolve(pid int, ret uint64) symbolize.Frame {
	fn, ok := f.funcs[ret]
	if !ok {
		return symbolize.Frame{Address: ret}
	}
	return symbolize.Frame{Address: ret, Function: fn, Module: "prog"}
}
func (f fakeCode) FuncStart(pid int, addr uint64) (uint64, bool) {
	s, ok := f.starts[addr]
	return s, ok
}
func (f fakeCode) Read(pid int, addr uint64, n int) ([]byte, bool) {
	b, ok := f.before[addr]
	return b, ok
}
func (f fakeCode) PLT(pid int, addr uint64) bool { return f.plt[addr] }

// execveCode is fakeCode that resolves execve's site as the Resolver does.
type execveCode struct{ fakeCode }

func (f execveCode) Resolve(pid int, ret uint64) symbolize.Frame {
	if ret == symbolize.ExecveSite+1 {
		return symbolize.Frame{Address: ret, Function: symbolize.ExecveFunction, Module: symbolize.ExecveModule}
	}
	return f.fakeCode.Resolve(pid, ret)
}

// callRel32 returns the 7 bytes before ret for `call target` (E8 rel32).
func callRel32(ret, target uint64) []byte {
	rel := int32(int64(target) - int64(ret))
	return []byte{0x90, 0x90, 0xe8, byte(rel), byte(rel >> 8), byte(rel >> 16), byte(rel >> 24)}
}

func TestBuild(t *testing.T) {
	// main (0x1000) calls outer (0x2000) calls inner (0x3000) calls malloc.
	// Return addresses: into inner 0x3010, into outer 0x2010, into main
	// 0x1010, into __libc_start_call_main 0x9010.
	code := fakeCode{
		funcs: map[uint64]string{0x3010: "inner", 0x2010: "outer", 0x1010: "mainloop", 0x9010: "start_thread", 0x7010: "other"},
		starts: map[uint64]uint64{
			0x3010: 0x3000, 0x2010: 0x2000, 0x1010: 0x1000, 0x9010: 0x9000,
		},
		before: map[uint64][]byte{
			0x3010: callRel32(0x3010, 0x5000),                  // inner calls malloc@plt
			0x2010: callRel32(0x2010, 0x3000),                  // outer calls inner
			0x1010: callRel32(0x1010, 0x2000),                  // main calls outer
			0x9010: {0x90, 0x90, 0x90, 0x90, 0x41, 0xff, 0xd4}, // call *%r12
			0x7010: {0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90}, // no call
		},
	}
	names := func(s Stack) []string {
		var n []string
		for _, f := range s.Frames {
			n = append(n, f.Function)
		}
		return n
	}
	exact := event.FrameExact
	tests := []struct {
		name      string
		frames    []uint64
		complete  bool
		depth     int
		want      []string
		truncated bool
	}{
		{"complete", []uint64{0x3010, 0x2010, 0x1010, 0x9010, 0x1234}, false, 10,
			[]string{"inner", "outer", "mainloop", "start_thread"}, false},
		// A frame that does not follow a call: cut there.
		{"not after a call", []uint64{0x3010, 0x2010, 0x7010, 0x9010}, false, 10, []string{"inner", "outer"}, true},
		{"garbage", []uint64{0x3010, 0x4242}, false, 10, []string{"inner"}, true},
		{"no callers", []uint64{0x3010}, false, 10, []string{"inner"}, true},
		// The unwind reached the outermost frame: complete without a known bottom.
		{"unwind complete", []uint64{0x3010, 0x2010}, true, 10, []string{"inner", "outer"}, false},
		{"depth", []uint64{0x3010, 0x2010, 0x1010, 0x9010}, false, 2, []string{"inner", "outer"}, true},
		// Signal frames (exact pcs) are not checked as return addresses:
		// an exact pc is resolved as itself (one before a return address).
		{"signal frame", []uint64{0x3010, 0x200f | exact, 0x100f | exact, 0x9010}, false, 10,
			[]string{"inner", "outer", "mainloop", "start_thread"}, false},
		{"execve's writes", []uint64{symbolize.ExecveSite | exact}, false, 10, []string{symbolize.ExecveFunction}, false},
	}
	// execve's own writes: the kernel made them, the stack is whole.
	execve := execveCode{code}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := Build(execve, 1, tt.frames, tt.complete, tt.depth)
			got := names(s)
			if len(got) != len(tt.want) || s.Truncated != tt.truncated {
				t.Fatalf("got %v truncated=%v, want %v truncated=%v", got, s.Truncated, tt.want, tt.truncated)
			}
			for i := range got {
				if got[i] != tt.want[i] {
					t.Fatalf("got %v, want %v", got, tt.want)
				}
			}
		})
	}
}

func TestIndirectCall(t *testing.T) {
	tests := []struct {
		name string
		b    []byte
		want bool
	}{
		{"call *%rax", []byte{0, 0, 0, 0, 0, 0xff, 0xd0}, true},
		{"call *%r12", []byte{0, 0, 0, 0, 0x41, 0xff, 0xd4}, true},
		{"call *0x10(%rax)", []byte{0, 0, 0, 0, 0xff, 0x50, 0x10}, true},
		{"call *0x0(%rip)", []byte{0, 0xff, 0x15, 0, 0, 0, 0}, true},
		{"call *(%rsp)", []byte{0, 0, 0, 0, 0xff, 0x14, 0x24}, true},
		{"jmp *%rax", []byte{0, 0, 0, 0, 0, 0xff, 0xe0}, false},
		{"nops", []byte{0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90}, false},
	}
	for _, tt := range tests {
		if got := indirectCall(tt.b); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}
