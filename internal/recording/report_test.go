package recording

import (
	"bytes"
	"io"
	"reflect"
	"slices"
	"testing"
)

// TestReportRoundTrip: report records come back as written, in order,
// between the records around them.
func TestReportRoundTrip(t *testing.T) {
	want := []Report{
		{Time: 5e9, All: true},
		{Time: 6e9, Final: true, PIDs: []uint32{42}},
		{Time: 7e9, Final: true, Exited: true},
		{Time: 8e9, Final: true, PIDs: []uint32{1, 70000, 4e9}},
		{Time: 9e9, Final: true, PIDs: []uint32{}},
	}
	var b bytes.Buffer
	w, err := NewWriter(&b, Info{Mode: "host"})
	if err != nil {
		t.Fatal(err)
	}
	for i := range want {
		w.Process(uint32(i), "p")
		w.Report(&want[i])
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	r, err := NewReader(&b)
	if err != nil {
		t.Fatal(err)
	}
	var got []Report
	var kinds []Kind
	var rec Record
	for {
		err := r.Next(&rec)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		kinds = append(kinds, rec.Kind)
		if rec.Kind == KindReport {
			p := rec.Report
			p.PIDs = slices.Clone(p.PIDs)
			if rec.Time != p.Time {
				t.Errorf("record time %d, report time %d", rec.Time, p.Time)
			}
			got = append(got, p)
		}
	}
	for i := range want {
		if want[i].PIDs == nil {
			want[i].PIDs = []uint32{}
		}
		if got[i].PIDs == nil {
			got[i].PIDs = []uint32{}
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("reports\n%+v\nwant\n%+v", got, want)
	}
	if wantKinds := slices.Repeat([]Kind{KindProcess, KindReport}, len(want)); !slices.Equal(kinds, wantKinds) {
		t.Errorf("kinds %v, want %v", kinds, wantKinds)
	}
}
