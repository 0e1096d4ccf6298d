package allocator

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/memtrace/memtrace/internal/event"
)

// TestBindPymalloc: where the interpreter keeps pymalloc's own functions'
// local symbols (pyenv's builds) they are probed, context first, in place
// of the PyObject_*/PyMem_* entry points that reach them (whose entries
// the kernel must single-step). Debian's stripped python3.11 inlines
// pymalloc's fast path: its pool helper alone is probed, with the pool
// size (16 KiB), and PyObject_Malloc's own calls are not (their blocks
// lie in the pools: counted twice).
func TestBindPymalloc(t *testing.T) {
	type interp struct {
		path string
		exe  bool
		want []string // probed symbols
		ctx  bool
		pool uint64
	}
	var tests []interp
	if _, err := os.Stat("/usr/bin/python3.11"); err == nil {
		tests = append(tests, interp{"/usr/bin/python3.11", true, []string{"allocate_from_new_pool"}, false, 16 << 10})
	} else if os.Getenv("CI") == "true" {
		t.Fatalf("CI=true but %v: install python3.11", err)
	}
	home, _ := os.UserHomeDir()
	libs, _ := filepath.Glob(filepath.Join(home, ".pyenv", "versions", "3.1[0-3].*", "lib", "libpython3.*.so.1.0"))
	for _, l := range libs {
		tests = append(tests, interp{l, false, []string{"_PyObject_Calloc", "_PyObject_Free", "_PyObject_Malloc", "_PyObject_Realloc"}, true, 0})
	}
	if len(tests) == 0 {
		t.Skip("no CPython here")
	}
	for _, tt := range tests {
		t.Run(filepath.Base(tt.path), func(t *testing.T) {
			// libc: Bind wants malloc and free somewhere.
			probes, err := Bind([]Module{{Path: tt.path, Module: tt.path, Exe: tt.exe},
				{Path: "/lib/x86_64-linux-gnu/libc.so.6", Module: "libc.so.6"}})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			codeFree := 0
			for _, p := range probes {
				if p.Func == event.FuncPyCodeFree {
					// Entry only, and its argument is the code object.
					codeFree++
					if p.Symbol != "code_dealloc" || p.CtxFirst || p.Path != tt.path {
						t.Errorf("the code_dealloc probe: %+v", p)
					}
				}
				if !p.Func.Python() {
					continue
				}
				got = append(got, p.Symbol)
				if p.CtxFirst != tt.ctx {
					t.Errorf("%s: CtxFirst %v, want %v", p.Symbol, p.CtxFirst, tt.ctx)
				}
				if (p.Func == event.FuncPyPool) != (tt.pool != 0) || p.PoolSize != tt.pool {
					t.Errorf("%s: %v with a pool of %d bytes, want %d", p.Symbol, p.Func, p.PoolSize, tt.pool)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("pymalloc probes %v, want %v", got, tt.want)
			}
			if codeFree != 1 {
				t.Errorf("%d probes on code_dealloc, want 1 (bpf/python.h keeps tags until it runs)", codeFree)
			}
		})
	}
}
