package recording

import (
	"bytes"
	"io"
	"reflect"
	"testing"

	"github.com/memtrace/memtrace/internal/footprint"
)

// TestFootprintRecord: a reading and its ranges read back as written.
func TestFootprintRecord(t *testing.T) {
	want := footprint.Reading{RSS: 600, RSSAnon: 100, RSSFile: 200, RSSShmem: 300, HeapResident: 40, AnonResident: 50,
		StackResident: 6, FileResident: 500, Unexplained: 4, CgroupMemory: 1 << 40, Cgroup: "/a/b", Attached: true,
		GoHeap: footprint.State{Reserved: 64 << 20, Committed: 8 << 20, Resident: 6 << 20}, GoHeapSource: "runtime", GoRuntimeResident: 7, Swap: 8 << 10, PSS: 500, Rollup: true,
		Ranges: []footprint.State{{Reserved: 8192, Committed: 4096, Resident: 4096}, {Reserved: 4096}},
		ManagedHeaps: []footprint.ManagedHeap{
			{Name: "Java heap", State: footprint.State{Reserved: 256 << 20, Committed: 64 << 20, Resident: 50 << 20}, Located: true, Source: "hsperfdata"},
			{Name: "Metaspace", State: footprint.State{Reserved: 64 << 20, Committed: 192 << 10}, Source: "hsperfdata"},
		}}
	ranges := []footprint.Range{{Start: 0x7f0000000000, End: 0x7f0000002000}, {Start: 0x7f0000010000, End: 0x7f0000011000}}
	r := written(t, "pid", func(w *Writer) { w.Footprint(42, 12345, want, ranges) })
	var rec Record
	if err := r.Next(&rec); err != nil {
		t.Fatal(err)
	}
	if rec.Kind != KindFootprint || rec.PID != 42 || rec.Time != 12345 {
		t.Fatalf("record %v pid %d time %d", rec.Kind, rec.PID, rec.Time)
	}
	if !reflect.DeepEqual(rec.Footprint, want) || !reflect.DeepEqual(rec.FootprintRanges, ranges) {
		t.Errorf("got %+v %+v\nwant %+v %+v", rec.Footprint, rec.FootprintRanges, want, ranges)
	}
	if err := r.Next(&rec); err != io.EOF {
		t.Errorf("after the record: %v, want io.EOF", err)
	}
}

// TestListedRecord: a listed process's name and reading read back as
// written, between other records.
func TestListedRecord(t *testing.T) {
	want := footprint.Reading{RSS: 110 << 20, RSSAnon: 100 << 20, RSSFile: 10 << 20, Swap: 4096, PSS: 105 << 20,
		Cgroup: "/system.slice/x.service", CgroupMemory: 1 << 30, Rollup: true}
	r := written(t, "host", func(w *Writer) {
		w.Listed(7, "qemu-system-x86", 999, want)
		w.Report(&Report{Time: 1000, All: true})
	})
	var rec Record
	if err := r.Next(&rec); err != nil {
		t.Fatal(err)
	}
	if rec.Kind != KindListed || rec.PID != 7 || rec.Comm != "qemu-system-x86" || rec.Time != 999 || !reflect.DeepEqual(rec.Footprint, want) {
		t.Errorf("got %v %d %q %d %+v, want the listed record of %+v", rec.Kind, rec.PID, rec.Comm, rec.Time, rec.Footprint, want)
	}
	if err := r.Next(&rec); err != nil || rec.Kind != KindReport || rec.Report.Time != 1000 {
		t.Errorf("then %v %+v (%v), want the report", rec.Kind, rec.Report, err)
	}
}

// written is a reader of a recording of mode whose records write wrote.
func written(t *testing.T, mode string, write func(*Writer)) *Reader {
	t.Helper()
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Info{Mode: mode})
	if err != nil {
		t.Fatal(err)
	}
	write(w)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}
