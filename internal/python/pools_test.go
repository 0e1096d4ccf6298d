package python

import (
	"debug/elf"
	"errors"
	"testing"
)

// TestNewPool finds allocate_from_new_pool where the build inlines
// pymalloc's fast path (Debian's python3.11: at 0x4d0ce0 in 3.11.2-6+deb12u9,
// checked against its disassembly, with 16 KiB pools), and nothing in
// pyenv's builds, whose PyObject_Malloc only jumps through the allocator
// table (their pymalloc functions keep symbols and are probed instead).
func TestNewPool(t *testing.T) {
	eachInterpreter(t, func(t *testing.T, path string, f *elf.File) {
		got, pool, err := NewPool(f)
		if path != "/usr/bin/python3.11" {
			if !errors.Is(err, ErrNoPoolHelper) {
				t.Errorf("NewPool = %#x, %d, %v; want ErrNoPoolHelper", got, pool, err)
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if pool != 16<<10 || !inCode(f, got) {
			t.Errorf("NewPool = %#x, %d bytes; want a function of the code, 16 KiB pools", got, pool)
		}
		t.Logf("allocate_from_new_pool at %#x, called from %d places", got, directCalls(f, got))
	})
}
