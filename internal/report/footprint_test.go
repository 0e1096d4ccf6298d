package report

import (
	"bytes"
	"reflect"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/footprint"
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

// TestFootprintGo: a Go program without C allocations gets its Go heap's
// states and its runtime's memory, and no malloc heap line; the host
// table's HEAP RSS holds its Go heap; JSON carries the Go fields.
func TestFootprintGo(t *testing.T) {
	p := aggregate.ProcessSnapshot{PID: 3, Comm: "goprog"}
	p.SetFootprint(footprint.Reading{RSS: 200 << 20, RSSAnon: 198 << 20, RSSFile: 2 << 20, StackResident: 16 << 10,
		FileResident: 2 << 20, GoHeap: footprint.State{Reserved: 256 << 20, Committed: 196 << 20, Resident: 192 << 20},
		GoHeapSource: footprint.GoHeapFromRuntime, GoRuntimeResident: 1 << 20, Unexplained: (5 << 20) - (16 << 10)})
	var b bytes.Buffer
	if err := WriteText(&b, snapshotOf(0, p), fixtureSymbols, Options{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"  go heap:     reserved 256.0 MiB, committed 196.0 MiB, resident 192.0 MiB (arenas from the runtime's mheap_)\n",
		"  rest of rss: go runtime 1.0 MiB, mmap 0 B, stacks 16.0 KiB, files 2.0 MiB, unexplained 5.0 MiB\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "heap rss:") {
		t.Errorf("a Go program without C allocations has a heap rss line:\n%s", out)
	}
	b.Reset()
	if err := WriteText(&b, snapshotOf(0, p), fixtureSymbols, Options{Host: true, Raw: true}); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), " 201326592 ") {
		t.Errorf("host table's HEAP RSS lacks the Go heap (201326592):\n%s", b.String())
	}
	rec := newFootprintRecord(p)
	if rec.GoHeapReservedBytes != 256<<20 || rec.GoHeapCommittedBytes != 196<<20 || rec.GoHeapResidentBytes != 192<<20 ||
		rec.GoHeapSource != "runtime" || rec.GoRuntimeResidentBytes != 1<<20 {
		t.Errorf("record %+v", rec)
	}
}

// TestFootprintFieldsDocumented: every field of the footprint object is
// in docs/json.md.
func TestFootprintFieldsDocumented(t *testing.T) {
	doc, err := readDoc()
	if err != nil {
		t.Fatal(err)
	}
	typ := reflect.TypeOf(footprintRecord{})
	for i := range typ.NumField() {
		if f := "`footprint." + typ.Field(i).Tag.Get("json") + "`"; !strings.Contains(doc, f) {
			t.Errorf("docs/json.md does not document %s", f)
		}
	}
}
