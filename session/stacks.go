package session

import (
	"github.com/memtrace/memtrace/aggregate"
	"github.com/memtrace/memtrace/callstack"
	"github.com/memtrace/memtrace/symbolize"
	"github.com/memtrace/memtrace/tracer"
)

// stackSource gives the report each --detail site's checked stack: the raw
// frames from the probes' stack map, composed and checked by callstack.
type stackSource struct {
	objs  *tracer.Objects
	code  codeView
	depth int
}

func (s stackSource) Stack(pid uint32, site aggregate.SiteSnapshot) callstack.Stack {
	frames, complete := s.objs.Stack(site.StackID)
	if len(frames) == 0 {
		frames = []uint64{site.Address}
	}
	return callstack.Build(s.code, int(pid), frames, complete, s.depth)
}

// codeView adapts symbolize.Resolver to callstack.Code.
type codeView struct{ *symbolize.Resolver }

func (c codeView) Read(pid int, addr uint64, n int) ([]byte, bool) {
	return c.CodeBefore(pid, addr, n)
}
