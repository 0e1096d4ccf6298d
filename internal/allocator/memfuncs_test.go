package allocator

import "testing"

func TestMemoryFunction(t *testing.T) {
	for _, tt := range []struct {
		name string
		want bool
	}{
		{"memset", true},
		{"__memset_avx2_unaligned_erms", true},
		{"_int_malloc", true},
		{"__libc_calloc", true},
		{"read", true},
		{"_Znwm", true}, // the allocation wrappers count too
		{"runtime.memclrNoHeapPointersChunked", true},
		{"runtime.mallocgc", true},
		{"internal/runtime/syscall/linux.Syscall6", true},
		{"syscall.read", true},
		{"internal/poll.(*FD).Read", true},
		{"os.(*File).Read", true},
		{"os.ReadFile", true},
		{"os.(*File).Write", false},
		{"_ZN4Copy21fill_to_memory_atomicEPvmh", true},
		{"_ZN4Copy22conjoint_memory_atomicEPKvPvm", true},
		{"_ZN14CopyFailedInfo5resetEv", false},
		{"main.keepSlices", false},
		{"hold_malloc", false},
		{"memtrace_mark", false},
		{"", false},
	} {
		if got := MemoryFunction(tt.name); got != tt.want {
			t.Errorf("MemoryFunction(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
}
