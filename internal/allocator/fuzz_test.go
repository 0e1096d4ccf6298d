package allocator

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzELF: the files allocator reads are the traced processes' binaries
// and libraries: any bytes give symbols, imports or an error, never a
// panic or an allocation without bound. Seeds (testdata/fuzz/FuzzELF): a
// tiny shared library defining malloc and free, needing libc, with a
// symbol table (gcc -O2 -shared -fPIC -nostdlib -Wl,-soname,libtiny.so
// -Wl,-z,max-page-size=16 -Wl,--build-id=none tiny.c -lc), and a cut of it.
//
//	void *malloc(unsigned long n) { return (void *)n; }
//	void free(void *p) { (void)p; }
func FuzzELF(f *testing.F) {
	f.Add([]byte("\x7fELF\x02\x01\x01"))
	f.Fuzz(func(t *testing.T, in []byte) {
		path := filepath.Join(t.TempDir(), "lib.so")
		if err := os.WriteFile(path, in, 0o644); err != nil {
			t.Fatal(err)
		}
		definedFunctions(path, true, allocatorNames)
		interpreter(path)
		needed(path)
		soname(path)
		JVMProbes(Module{Path: path, Module: "libjvm.so"})
	})
}
