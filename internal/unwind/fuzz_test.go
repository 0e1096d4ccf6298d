package unwind

import (
	"bytes"
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"

	"github.com/memtrace/memtrace/internal/elftest"
)

// FuzzBuild feeds mutated frame sections, wrapped in a minimal ELF file,
// to Build: it must return a table that keeps the invariants, or an error
// wrapping ErrMalformed; never panic, never loop. `make test` runs the
// seed corpus only; for a longer run:
//
//	go test -run '^$' -fuzz FuzzBuild -fuzztime 10m ./unwind/
func FuzzBuild(f *testing.F) {
	for _, c := range frameCases {
		sec := c.section()
		f.Add(sec.data, c.debug)
	}
	// Real sections from gcc: .eh_frame of an executable (with the PLT's
	// expression, a DRAP function, _start) and .debug_frame.
	if _, err := exec.LookPath("gcc"); err == nil {
		dir := f.TempDir()
		for _, v := range []struct {
			section string
			flags   []string
		}{
			{".eh_frame", []string{"-O2"}},
			{".debug_frame", []string{"-O2", "-g", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables", "-nostartfiles", "-e", "main"}},
		} {
			bin := filepath.Join(dir, "frames"+v.section)
			args := append(append([]string{}, v.flags...), "-o", bin, filepath.Join(fixtureDir, "frames.c"))
			if out, err := exec.Command("gcc", args...).CombinedOutput(); err != nil {
				f.Fatalf("gcc: %v\n%s", err, out)
			}
			ef, err := elf.Open(bin)
			if err != nil {
				f.Fatal(err)
			}
			data, err := ef.Section(v.section).Data()
			ef.Close()
			if err != nil {
				f.Fatal(err)
			}
			f.Add(data, v.section == ".debug_frame")
		}
	}
	f.Fuzz(func(t *testing.T, data []byte, debug bool) {
		name := ".eh_frame"
		if debug {
			name = ".debug_frame"
		}
		ef, err := elf.NewFile(bytes.NewReader(minimalELF(name, 0x4000, data)))
		if err != nil {
			t.Fatal(err)
		}
		tab, err := Build(ef)
		if err != nil {
			if !errors.Is(err, ErrMalformed) {
				t.Fatalf("error %v does not wrap ErrMalformed", err)
			}
			return
		}
		checkInvariants(t, tab)
		if _, err := tab.Encode(); err != nil && tab.Rows[len(tab.Rows)-1].PC <= 0xffffffff {
			t.Fatalf("encode: %v", err)
		}
		c := tab.Clone()
		c.Mark(0x1000, 0x2000, FlagWrapper)
		checkInvariants(t, c)
	})
}

// TestHugeFrameSection: a section header claiming 2 GiB of call frame
// information (more than the file holds, or a compressed section that
// would inflate to it) is refused before anything is read: the file is
// malformed, and nothing near its claim is allocated.
func TestHugeFrameSection(t *testing.T) {
	bin := compile(t, "frames.c", "frames", "-O2")
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	hostile, err := elftest.WithSectionSize(b, ".eh_frame", 2<<30)
	if err != nil {
		t.Fatal(err)
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = Build(hostile)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, ErrMalformed) {
		t.Errorf("Build = %v, want ErrMalformed", err)
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 16<<20 {
		t.Errorf("Build allocated %d bytes", n)
	}
}
