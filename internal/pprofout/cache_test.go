package pprofout

import (
	"testing"

	"github.com/memtrace/memtrace/internal/aggregate"
)

// TestCache: what was looked up while the process lived still resolves
// after its source forgot it; Forget drops it; misses are not kept.
func TestCache(t *testing.T) {
	src := fakeCode{0x1010: code[0x1010]}
	c := NewCache(Sources{Symbolizer: src, Mappings: src})
	c.Warm(aggregate.Snapshot{Processes: []aggregate.ProcessSnapshot{{PID: 7, Sites: []aggregate.SiteSnapshot{
		{Address: 0x1010, StackID: -1, Stats: aggregate.Stats{LiveBytes: 1}},
		{Address: 0x1020, StackID: -1, Stats: aggregate.Stats{LiveBytes: 1}},
	}}}})
	delete(src, 0x1010) // forgotten by the source
	src[0x1020] = code[0x1020]
	s := c.Sources()
	if f := s.Symbolizer.Resolve(7, 0x1010); f.Function != "leaf" {
		t.Errorf("cached frame lost: %+v", f)
	}
	if m, ok := s.Mappings.MappingOf(7, 0x100b); !ok || m.BuildID != "abcd" {
		t.Errorf("cached mapping lost: %+v %v", m, ok)
	}
	if f := s.Symbolizer.Resolve(7, 0x1020); f.Function != "outer" {
		t.Errorf("a miss was cached: %+v", f)
	}
	c.Forget(7)
	if f := s.Symbolizer.Resolve(7, 0x1010); f.Function != "" {
		t.Errorf("after Forget: %+v", f)
	}
}
