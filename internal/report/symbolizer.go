package report

import "github.com/memtrace/memtrace/internal/symbolize"

// Symbolizer resolves a call site's return address in a process to a frame.
// The symbolize package provides the real one; tests pass a fake.
type Symbolizer interface {
	Resolve(pid int, ret uint64) symbolize.Frame
}

// resolve tolerates a nil Symbolizer so a report can still be printed (with
// raw addresses) when symbolization is switched off or failed to start.
func resolve(sym Symbolizer, pid uint32, ret uint64) symbolize.Frame {
	if sym == nil {
		return symbolize.Frame{Address: ret}
	}
	f := sym.Resolve(int(pid), ret)
	if f.Address == 0 {
		f.Address = ret
	}
	return f
}
