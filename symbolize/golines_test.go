package symbolize

import (
	"debug/elf"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/gopclntab"
)

// TestGoLinesWithoutDWARF: a Go program built without DWARF (-ldflags=-w)
// or symbols (-s -w) has the same function names, and the same file and
// line for code not inlined, as the same program with DWARF, from its
// function table (.gopclntab).
func TestGoLinesWithoutDWARF(t *testing.T) {
	dir := t.TempDir()
	build := func(name string, flags ...string) string {
		out := filepath.Join(dir, name)
		cmd := exec.Command("go", append(append([]string{"build"}, flags...), "-o", out, ".")...)
		cmd.Dir = filepath.Join("..", "testdata", "resident_go")
		cmd.Env = append(os.Environ(), "CGO_ENABLED=0")
		if b, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("go build: %v\n%s", err, b)
		}
		return out
	}
	withDWARF := build("dwarf")
	ref, err := OpenModule(withDWARF)
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	ef, err := elf.Open(withDWARF)
	if err != nil {
		t.Fatal(err)
	}
	defer ef.Close()
	tab, err := gopclntab.Read(ef)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct{ name, ldflags string }{{"no DWARF", "-w"}, {"stripped", "-s -w"}} {
		t.Run(tc.name, func(t *testing.T) {
			m, err := OpenModule(build(strings.ReplaceAll(tc.ldflags, " ", ""), "-ldflags="+tc.ldflags))
			if err != nil {
				t.Fatal(err)
			}
			defer m.Close()
			var lines int
			for _, fn := range tab.Funcs {
				if !strings.HasPrefix(fn.Name, "main.") {
					continue
				}
				for pc := fn.Entry; pc < fn.End; pc++ {
					want := ref.Function(pc)
					if want == "" {
						continue // padding after the function: .symtab's size leaves it out
					}
					if got := m.Function(pc); got != want {
						t.Fatalf("%#x: function %q, with DWARF %q", pc, got, want)
					}
					file, line := m.Line(pc)
					if line == 0 {
						continue // inlined code
					}
					lines++
					if wf, wl := ref.Line(pc); file != wf || line != wl {
						t.Fatalf("%s at %#x: %s:%d, with DWARF %s:%d", fn.Name, pc, file, line, wf, wl)
					}
				}
			}
			if lines < 100 {
				t.Fatalf("only %d pcs of main's functions have a line", lines)
			}
		})
	}
}
