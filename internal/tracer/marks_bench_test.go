package tracer

import (
	"debug/elf"
	"testing"

	"github.com/memtrace/memtrace/internal/allocator"
)

// BenchmarkFunctionMarks: reading node's symbols for the marks of its
// unwind table (the big binary; side by side with the CFI build on
// a first run).
func BenchmarkFunctionMarks(b *testing.B) {
	f, err := elf.Open("/usr/bin/node")
	if err != nil {
		b.Skip(err)
	}
	defer f.Close()
	rule := allocator.NewWrapperRule(allocator.DefaultWrappers, true, nil)
	b.ReportAllocs()
	for b.Loop() {
		functionMarks(f, rule.Wraps)
	}
}
