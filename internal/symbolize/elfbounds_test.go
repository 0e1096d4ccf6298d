package symbolize

import (
	"debug/elf"
	"os"
	"runtime"
	"testing"

	"github.com/memtrace/memtrace/internal/elftest"
)

// TestHugeSymbolTable: a .symtab header claiming 2 GiB is refused before
// it is read: the module loads without its symbols, and allocates nothing
// near the claim.
func TestHugeSymbolTable(t *testing.T) {
	needTool(t, "gcc")
	bin := buildFixture(t, tempDir(t), "leak", "-O2", "-g")
	b, err := os.ReadFile(bin)
	if err != nil {
		t.Fatal(err)
	}
	hostile, err := elftest.WithSectionSize(b, ".symtab", 2<<30)
	if err != nil {
		t.Fatal(err)
	}
	if TablesFit(hostile, elf.SHT_SYMTAB) || !TablesFit(hostile, elf.SHT_DYNSYM) {
		t.Errorf("TablesFit: .symtab %v, .dynsym %v; want false, true",
			TablesFit(hostile, elf.SHT_SYMTAB), TablesFit(hostile, elf.SHT_DYNSYM))
	}
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err = functionSymbols(hostile, nil)
	runtime.ReadMemStats(&after)
	if err == nil {
		t.Error("functionSymbols took a 2 GiB .symtab")
	}
	if n := after.TotalAlloc - before.TotalAlloc; n > 16<<20 {
		t.Errorf("functionSymbols allocated %d bytes", n)
	}
}
