package tracer

import (
	"debug/elf"
	"os"
	"testing"

	"github.com/memtrace/memtrace/internal/allocator"
)

// BenchmarkFunctionMarks: reading node's symbols for the marks of its
// unwind table (the big binary; side by side with the CFI build on
// a first run).
func BenchmarkFunctionMarks(b *testing.B) {
	const node = "/usr/bin/node"
	st, err := os.Stat(node)
	if err != nil {
		b.Skip(err)
	}
	f, err := elf.Open(node)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	rule := allocator.NewWrapperRule(allocator.DefaultWrappers, true, nil)
	b.ReportAllocs()
	for b.Loop() {
		functionMarks(f, uint64(st.Size()), rule.Wraps)
	}
}
