package tracer

import (
	"bytes"
	"testing"
)

func TestEntryOffset(t *testing.T) {
	tests := []struct {
		name string
		code []byte
		args int
		want int
	}{
		// glibc 2.36 malloc: push %r12 — emulated at +0.
		{"push first", []byte{0x41, 0x54, 0x55, 0x53, 0x48, 0x89, 0xfb}, 2, 0},
		// glibc 2.36 free: test %rdi,%rdi; je … — probe the je.
		{"test then je", []byte{0x48, 0x85, 0xff, 0x0f, 0x84, 0xbf, 0, 0, 0, 0x55}, 2, 3},
		// CET: endbr64; push %rbp.
		{"endbr64 then push", []byte{0xf3, 0x0f, 0x1e, 0xfa, 0x55, 0x48, 0x89, 0xe5}, 2, 4},
		// endbr64; jmp rel32 (a tail call to the real allocator).
		{"endbr64 then jmp", []byte{0xf3, 0x0f, 0x1e, 0xfa, 0xe9, 1, 2, 3, 4}, 2, 4},
		// endbr64; test %rdi,%rdi; je.
		{"endbr64 test je", []byte{0xf3, 0x0f, 0x1e, 0xfa, 0x48, 0x85, 0xff, 0x74, 0x10}, 2, 7},
		// mov %rdi,%rbx writes no argument register: skippable.
		{"mov to callee-saved", []byte{0x48, 0x89, 0xfb, 0x55}, 2, 3},
		// mov %rsi,%rdi overwrites the first argument: stay at +0.
		{"mov into argument", []byte{0x48, 0x89, 0xf7, 0x55}, 2, 0},
		// sub $0x10,%rsp moves sp: stay at +0.
		{"sub rsp", []byte{0x48, 0x83, 0xec, 0x10, 0x55}, 2, 0},
		// test; je back to +3 (a loop onto the probe): stay at +0.
		{"branch into skipped bytes", []byte{0x48, 0x85, 0xff, 0x74, 0x00, 0xeb, 0xfc}, 2, 0},
		// Seventeen skippable instructions before anything emulated: too far.
		{"too long", append(bytes.Repeat([]byte{0x48, 0x85, 0xff}, 17), 0x55), 2, 0},
		// jemalloc 5.3's free: ten register-only instructions (mov, shr,
		// and, add %fs:0, cmp with memory) before its first branch.
		{"jemalloc free", []byte{
			0x48, 0x89, 0xf8, // mov %rdi,%rax
			0x48, 0x8b, 0x15, 0x0e, 0x53, 0x0a, 0x00, // mov 0xa530e(%rip),%rdx
			0x48, 0x89, 0xf9, // mov %rdi,%rcx
			0x48, 0xc1, 0xe8, 0x1a, // shr $0x1a,%rax
			0x48, 0x81, 0xe1, 0x00, 0x00, 0x00, 0xc0, // and $0xffffffffc0000000,%rcx
			0x25, 0xf0, 0x00, 0x00, 0x00, // and $0xf0,%eax
			0x64, 0x48, 0x03, 0x04, 0x25, 0x00, 0x00, 0x00, 0x00, // add %fs:0x0,%rax
			0x48, 0x01, 0xd0, // add %rdx,%rax
			0x48, 0x3b, 0x88, 0xb0, 0x01, 0x00, 0x00, // cmp 0x1b0(%rax),%rcx
			0x0f, 0x85, 0x8a, 0x00, 0x00, 0x00, // jne
		}, 1, 48},
		// The same prologue in a two-argument function: mov %rdi,%rcx is
		// harmless, but writing rdx (the third) is fine and rsi untouched —
		// with three arguments, mov …,%rdx must stop it.
		{"jemalloc free, three arguments", []byte{
			0x48, 0x89, 0xf8, // mov %rdi,%rax
			0x48, 0x8b, 0x15, 0x0e, 0x53, 0x0a, 0x00, // mov 0xa530e(%rip),%rdx
			0x55,
		}, 3, 0},
		// add $8,%rsp moves sp; xor %esi,%esi clears the second argument.
		{"add to rsp", []byte{0x48, 0x83, 0xc4, 0x08, 0x55}, 1, 0},
		{"xor second argument", []byte{0x31, 0xf6, 0x55}, 2, 0},
		{"xor non-argument", []byte{0x31, 0xc0, 0x55}, 2, 2},
		{"empty", nil, 2, 0},
		// jemalloc's free: mov 0x…(%rip),%rdx writes the third argument
		// register, which a one-argument function does not read.
		{"third register, one argument", []byte{0x48, 0x8b, 0x15, 0, 0, 0, 0, 0x55}, 1, 7},
		{"third register, three arguments", []byte{0x48, 0x8b, 0x15, 0, 0, 0, 0, 0x55}, 3, 0},
		{"garbage", []byte{0x0f, 0x0b}, 2, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, why := EntryOffset(tt.code, tt.args)
			if got != tt.want {
				t.Fatalf("EntryOffset = %d (%s), want %d", got, why, tt.want)
			}
		})
	}
}
