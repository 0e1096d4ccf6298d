package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/aggregate"
	"github.com/memtrace/memtrace/footprint"
)

// footprintSnapshot: two processes, the smaller heap with the larger RSS,
// and two mmap sites, the smaller with more resident.
func footprintSnapshot() aggregate.Snapshot {
	a := aggregate.ProcessSnapshot{PID: 1, Comm: "big-heap", Heap: aggregate.Stats{LiveBytes: 8 << 20}}
	a.SetFootprint(footprint.Reading{RSS: 10 << 20, RSSAnon: 9 << 20, RSSFile: 1 << 20, HeapResident: 9 << 20, FileResident: 1 << 20})
	b := aggregate.ProcessSnapshot{PID: 2, Comm: "big-rss", Heap: aggregate.Stats{LiveBytes: 1 << 20},
		Mapped: aggregate.Stats{LiveBytes: 12 << 20, LiveAllocs: 2},
		Sites: []aggregate.SiteSnapshot{
			{Address: 0x10, Category: aggregate.Mapped, Stats: aggregate.Stats{LiveBytes: 8 << 20, LiveAllocs: 1}},
			{Address: 0x20, Category: aggregate.Mapped, Stats: aggregate.Stats{LiveBytes: 4 << 20, LiveAllocs: 1}},
		},
		Regions:     []footprint.Range{{Start: 0x1000000, End: 0x1800000}, {Start: 0x2000000, End: 0x2400000}},
		RegionSites: []int{0, 1},
	}
	b.SetFootprint(footprint.Reading{RSS: 40 << 20, RSSAnon: 39 << 20, RSSFile: 1 << 20, HeapResident: 30 << 20,
		AnonResident: 5 << 20, FileResident: 1 << 20, Unexplained: 4 << 20,
		Ranges: []footprint.State{{Reserved: 8 << 20, Committed: 1 << 20, Resident: 1 << 20}, {Reserved: 4 << 20, Committed: 4 << 20, Resident: 4 << 20}}})
	return snapshotOf(0, a, b)
}

func TestSortRSS(t *testing.T) {
	procs := rank(footprintSnapshot(), Options{Sort: SortRSS})
	if procs[0].PID != 2 {
		t.Errorf("first process %d, want 2 (the larger RSS)", procs[0].PID)
	}
	if m := procs[0].mapped; len(m) != 2 || m[0].Address != 0x20 || m[0].Mapping.Resident != 4<<20 {
		t.Errorf("mmap sites %+v, want 0x20 (4 MiB resident) first", m)
	}
	if got := procs[0].MappedState; got != (footprint.State{Reserved: 12 << 20, Committed: 5 << 20, Resident: 5 << 20}) {
		t.Errorf("mapped state %+v", got)
	}
}

func TestFootprintText(t *testing.T) {
	var b bytes.Buffer
	if err := WriteText(&b, footprintSnapshot(), fixtureSymbols, Options{Sort: SortRSS, Raw: false}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"  mmap state:  reserved 12.0 MiB, committed 5.0 MiB, resident 5.0 MiB\n",
		"  rss:         40.0 MiB (anon 39.0 MiB, file 1.0 MiB, shmem 0 B)\n",
		"  heap rss:    30.0 MiB = live 1.0 MiB + retained 29.0 MiB (utilization 3%)\n",
		"  rest of rss: mmap 5.0 MiB, stacks 0 B, files 1.0 MiB, unexplained 4.0 MiB\n",
		"most of the heap's RSS holds no live block",
		"  heap rss:    9.0 MiB = live 8.0 MiB + retained 1.0 MiB (utilization 88%)\n",
		"UNMAPPED  COMMITTED  RESIDENT  FUNCTION",
		"1.0 MiB   1.0 MiB  [unknown]",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	b.Reset()
	if err := WriteText(&b, footprintSnapshot(), fixtureSymbols, Options{Sort: SortRSS, Host: true}); err != nil {
		t.Fatal(err)
	}
	if out := b.String(); !strings.Contains(out, "processes by RSS (all 2)") || !strings.Contains(out, "CGROUP MEM") {
		t.Errorf("host table lacks the RSS ranking or the footprint columns:\n%s", out)
	}
}
