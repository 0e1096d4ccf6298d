package report

import (
	"encoding/json"
	"slices"
	"testing"

	"github.com/memtrace/memtrace/internal/aggregate"
)

// fakeLeaks checks pid 77 only: every heap site gets the same figures.
type fakeLeaks struct{}

func (fakeLeaks) ProcessLeaks(pid uint32) (LeakFigures, bool) {
	if pid != 77 {
		return LeakFigures{}, false
	}
	return LeakFigures{DefinitelyLostBytes: 100, DefinitelyLostBlocks: 1, IndirectlyLostBytes: 128,
		IndirectlyLostBlocks: 4, PossiblyLostBytes: 64, PossiblyLostBlocks: 1, ReachableBytes: 1 << 40,
		ReachableBlocks: 7, SuppressedBytes: 72704, SuppressedBlocks: 1}, true
}

func (fakeLeaks) SiteLeaks(pid uint32, site aggregate.SiteKey) LeakFigures {
	if pid != 77 {
		return LeakFigures{}
	}
	return LeakFigures{DefinitelyLostBytes: 100, DefinitelyLostBlocks: 1}
}

// TestJSONLeakFields: with a leak check, process and heap callsite records
// end with the leak fields (mmap sites have no blocks to classify), exact
// and in the documented order; without one they are absent (the other
// tests).
func TestJSONLeakFields(t *testing.T) {
	lines := jsonLines(t, periodicSnapshot(), fixtureSymbols, Options{Leaks: fakeLeaks{}})
	var checked int
	for _, line := range lines {
		m := decodeLine(t, line)
		keys := objectKeys(t, []byte(line))
		switch m["type"] {
		case "process":
			want := append(slices.Clone(jsonFields["process"]), leakProcessFields...)
			if !slices.Equal(keys[:len(want)], want) {
				t.Errorf("process keys %v, want %v", keys, want)
			}
			var p struct {
				PID         uint32 `json:"pid"`
				LeakChecked bool   `json:"leak_checked"`
				Reachable   uint64 `json:"reachable_bytes"`
				Suppressed  uint64 `json:"suppressed_blocks"`
			}
			json.Unmarshal([]byte(line), &p)
			if p.PID == 77 {
				checked++
				if !p.LeakChecked || p.Reachable != 1<<40 || p.Suppressed != 1 {
					t.Errorf("pid 77: %+v", p)
				}
			} else if p.LeakChecked || p.Reachable != 0 {
				t.Errorf("unchecked process: %+v", p)
			}
		case "callsite":
			_, has := m["definitely_lost_bytes"]
			if m["category"] == "mmap" {
				if has {
					t.Errorf("mmap site with leak fields: %s", line)
				}
				continue
			}
			want := append(slices.Clone(jsonFields["callsite"]), leakFields...)
			if !slices.Equal(keys[:len(want)], want) {
				t.Errorf("callsite keys %v, want %v", keys, want)
			}
		}
	}
	if checked != 1 {
		t.Errorf("%d checked processes, want 1", checked)
	}
}
