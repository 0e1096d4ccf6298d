package report

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/aggregate"
)

// A dump's records carry the activity since the previous dump, in both
// layouts; a site new since then counts from zero.
func TestEpochFields(t *testing.T) {
	snap := func(allocs uint64, newSite bool) aggregate.Snapshot {
		p := aggregate.ProcessSnapshot{PID: 5, Comm: "app", Heap: aggregate.Stats{Allocs: allocs, AllocBytes: 10 * allocs}}
		p.Sites = []aggregate.SiteSnapshot{{Address: 0x10, StackID: -1, Stats: aggregate.Stats{Allocs: allocs, AllocBytes: 10 * allocs}}}
		if newSite {
			p.Sites = append(p.Sites, aggregate.SiteSnapshot{Address: 0x20, StackID: -1, Stats: aggregate.Stats{Allocs: 1, AllocBytes: 7, Frees: 1, FreedBytes: 7}})
			p.Heap.Allocs++
			p.Heap.AllocBytes += 7
			p.Heap.Frees++
			p.Heap.FreedBytes += 7
		}
		return aggregate.Snapshot{Time: allocs, Processes: []aggregate.ProcessSnapshot{p}, Marks: []aggregate.Mark{{PID: 5, Label: "m", Seq: 1, Time: 1}}}
	}
	first := snap(3, false)
	e := FirstEpoch().Next(first)
	for _, host := range []bool{false, true} {
		var b bytes.Buffer
		if err := WriteJSON(&b, snap(8, true), nil, Options{Epoch: e, Host: host}); err != nil {
			t.Fatal(err)
		}
		got := map[string][4]uint64{}
		var epoch, marks int
		for l := range strings.Lines(b.String()) {
			var r struct {
				Type            string `json:"type"`
				Address         string `json:"address"`
				Epoch           int    `json:"epoch"`
				EpochAllocs     uint64 `json:"epoch_allocs"`
				EpochAllocBytes uint64 `json:"epoch_alloc_bytes"`
				EpochFrees      uint64 `json:"epoch_frees"`
				EpochFreedBytes uint64 `json:"epoch_freed_bytes"`
			}
			if err := json.Unmarshal([]byte(l), &r); err != nil {
				t.Fatal(err)
			}
			switch r.Type {
			case "report":
				epoch = r.Epoch
			case "mark":
				marks++
			case "process", "callsite":
				got[r.Type+r.Address] = [4]uint64{r.EpochAllocs, r.EpochAllocBytes, r.EpochFrees, r.EpochFreedBytes}
			}
		}
		want := map[string][4]uint64{"process": {6, 57, 1, 7}, "callsite0x10": {5, 50, 0, 0}, "callsite0x20": {1, 7, 1, 7}}
		if epoch != 2 || len(got) != len(want) {
			t.Errorf("host %v: epoch %d, records %v", host, epoch, got)
		}
		for k, w := range want {
			if got[k] != w {
				t.Errorf("host %v: %s epoch figures %v, want %v", host, k, got[k], w)
			}
		}
		if !host && marks != 0 {
			t.Errorf("the mark of an earlier epoch is listed again")
		}
	}
}
