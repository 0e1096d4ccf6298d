package unwind

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/memtrace/memtrace/internal/gopclntab"
)

// TestGoFunctionsMatchDebugFrame: the rows Build makes from a Go binary's
// function table are the rows Go's linker writes to .debug_frame, pc by
// pc, for every function of testdata/resident_go built with its DWARF, so
// that a binary built with -ldflags=-w unwinds as one with DWARF does.
func TestGoFunctionsMatchDebugFrame(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "resident_go")
	cmd := exec.Command("go", "build", "-o", exe, ".")
	cmd.Dir = filepath.Join("..", "..", "testdata", "resident_go")
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if f.Section(".debug_frame") == nil {
		t.Fatal("go build wrote no .debug_frame to compare with")
	}
	withDWARF, err := Build(f) // .debug_frame takes precedence
	if err != nil {
		t.Fatal(err)
	}
	var b builder
	b.addGoFunctions(f)
	fromTable := b.table()
	tab, err := gopclntab.Read(f)
	if err != nil {
		t.Fatal(err)
	}
	var checked int
	for _, fn := range tab.Funcs {
		sp, err := tab.SPDeltas(fn)
		if err != nil {
			t.Fatal(err)
		}
		for _, r := range sp {
			for _, pc := range []uint64{r.PC, (r.PC + r.End) / 2, r.End - 1} {
				want, ok1 := withDWARF.Lookup(pc)
				got, ok2 := fromTable.Lookup(pc)
				if ok1 != ok2 || want.Kind != got.Kind || want.CFAOffset != got.CFAOffset || want.RBPSaved != got.RBPSaved {
					t.Fatalf("%s at %#x: %v from the function table, %v from .debug_frame", fn.Name, pc, got, want)
				}
				checked++
			}
		}
	}
	if checked < 10000 {
		t.Fatalf("only %d pcs checked", checked)
	}
}
