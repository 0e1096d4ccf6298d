package tracer

import "testing"

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
		// Five skippable instructions before anything emulated: too far.
		{"too long", []byte{0x48, 0x85, 0xff, 0x48, 0x85, 0xff, 0x48, 0x85, 0xff, 0x48, 0x85, 0xff, 0x48, 0x85, 0xff, 0x48, 0x85, 0xff, 0x55}, 2, 0},
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
