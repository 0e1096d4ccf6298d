package recording

import (
	"errors"
	"io"
	"reflect"
	"testing"

	"github.com/memtrace/memtrace/internal/access"
)

// TestAccessRecord: access starts and epochs, with their readings, read
// back as written, a reading larger than the writer's buffer included.
func TestAccessRecord(t *testing.T) {
	big := make([]access.Page, 3*bufLimit)
	for i := range big {
		big[i] = access.Page(i % 5 / 2 * 3 % 8) // 0, 0, 3, 3, 6: runs of varied bits
	}
	want := []Access{
		{PID: 42, Time: 100, Start: true, ColdAfter: 3, PageSize: 4096},
		{PID: 42, Time: 1100, Comm: "access", Method: "pagemap+pte-walk", Pages: access.Runs{PageSize: 4096, Runs: []access.Run{
			{Start: 0x7f0000000000, Pages: []access.Page{access.Present | access.Accessed, access.Present, access.Present, 0}},
			{Start: 0x7f0000100000, Pages: big},
		}}},
		{PID: 42, Time: 2100, Final: true, WrittenKnown: true, Comm: "access", Method: "pagemap+pte-walk+soft-dirty",
			Pages: access.Runs{PageSize: 4096, Runs: []access.Run{{Start: 0x1000, Pages: []access.Page{access.Present | access.Accessed | access.Written}}}}},
		{PID: 7, Time: 3000, Pages: access.Runs{PageSize: 2 << 20}},
	}
	r := written(t, "pid", func(w *Writer) {
		for i := range want {
			w.Access(&want[i])
		}
	})
	for i, a := range want {
		var rec Record
		if err := r.Next(&rec); err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		if rec.Kind != KindAccess || rec.PID != a.PID || rec.Time != a.Time {
			t.Errorf("record %d: kind %v pid %d time %d", i, rec.Kind, rec.PID, rec.Time)
		}
		if !reflect.DeepEqual(rec.Access, a) {
			t.Errorf("record %d: got %+v\nwant %+v", i, summary(rec.Access), summary(a))
		}
	}
	var rec Record
	if err := r.Next(&rec); err != io.EOF {
		t.Errorf("after the records: %v, want io.EOF", err)
	}
}

// summary is an Access without its pages, for messages.
func summary(a Access) Access {
	a.Pages.Runs = nil
	return a
}

// TestAccessRecordCorrupt: bad flags, page bits, run lengths and page
// sizes are corrupt records, not panics or huge allocations.
func TestAccessRecordCorrupt(t *testing.T) {
	tests := []struct {
		name string
		body []byte // after the tag
	}{
		{"flags", []byte{0x80, 1, 1}},
		{"page size", []byte{0, 1, 1, 0, 0, 3}},
		{"page bits", []byte{0, 1, 1, 0, 0, 0x80, 0x20, 1, 0, 1, 0x10, 1}},
		{"run longer than its pages", []byte{0, 1, 1, 0, 0, 0x80, 0x20, 1, 0, 1, 1, 2}},
		{"zero run", []byte{0, 1, 1, 0, 0, 0x80, 0x20, 1, 0, 1, 1, 0}},
		{"too many pages", []byte{0, 1, 1, 0, 0, 0x80, 0x20, 1, 0, 0x80, 0x80, 0x80, 0x80, 0x10}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := written(t, "pid", func(w *Writer) {
				w.record(tagAccess)
				w.buf = append(w.buf, tt.body...)
			})
			var rec Record
			if err := r.Next(&rec); !errors.Is(err, ErrCorrupt) {
				t.Errorf("got %v, want ErrCorrupt", err)
			}
		})
	}
}
