package report

import (
	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/callstack"
)

// StackSource gives the checked call stack of a call site (--detail).
type StackSource interface {
	Stack(pid uint32, site aggregate.SiteSnapshot) callstack.Stack
}

// stackFrame is one frame of a callsite's "stack" in JSON.
type stackFrame struct {
	Function string `json:"function"`
	File     string `json:"file"`
	Line     int    `json:"line"`
	Module   string `json:"module"`
	Address  string `json:"address"`
	// Inlined: as a callsite's "inlined", for this frame's call.
	Inlined []inlineFrame `json:"inlined"`
	// Python: a Python frame, as a callsite's "python".
	Python bool `json:"python"`
}

func stackRecord(st callstack.Stack) ([]stackFrame, *bool) {
	frames := make([]stackFrame, 0, len(st.Frames))
	for _, f := range st.Frames {
		frames = append(frames, stackFrame{Function: f.Function, File: f.File, Line: f.Line,
			Module: f.Module, Address: hex(f.Address), Inlined: inlineRecord(f.Inlined), Python: f.Python})
	}
	truncated := st.Truncated
	return frames, &truncated
}
