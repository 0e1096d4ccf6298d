package report

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/memtrace/memtrace/aggregate"
)

// TestResidentCheckedText: an exited process's resident header says when
// its figures are from: its last pagemap check, or none before it exited;
// a running process's says nothing. The NDJSON records carry the check's
// time.
func TestResidentCheckedText(t *testing.T) {
	res := func(checked uint64) *aggregate.ResidentSnapshot {
		return &aggregate.ResidentSnapshot{SampleBytes: 64 * KiB, CheckedNS: checked, Pages: 16, Bytes: 1 << 20, Stderr: 1000}
	}
	const head = "\n  resident by who made it resident (1 write fault sampled per 65536 B of faults): ~1048576 B ± 1000 B in 16 sampled pages\n"
	for _, c := range []struct {
		name string
		p    aggregate.ProcessSnapshot
		want string
	}{
		{"running", aggregate.ProcessSnapshot{PID: 1, Resident: res(4_600_000_000)}, head},
		{"checked", aggregate.ProcessSnapshot{PID: 1, Resident: res(4_600_000_000), Exited: true, ExitTime: 5_000_000_000},
			head + "  figures as of its last pagemap check, 400 ms before its exit was seen: pages released since stay charged\n"},
		{"long", aggregate.ProcessSnapshot{PID: 1, Resident: res(1_500_000_000), Exited: true, ExitTime: 5_000_000_000},
			head + "  figures as of its last pagemap check, 3.5 s before its exit was seen: pages released since stay charged\n"},
		{"at exit", aggregate.ProcessSnapshot{PID: 1, Resident: res(4_999_990_000), Exited: true, ExitTime: 5_000_000_000},
			head + "  figures as of the pagemap check at its exit\n"},
		{"never", aggregate.ProcessSnapshot{PID: 1, Resident: res(0), Exited: true, ExitTime: 5_000_000_000},
			head + "  no pagemap check before it exited: every sampled page made resident over its run\n"},
	} {
		var b bytes.Buffer
		if err := writeResidentText(&b, c.p, fixtureSymbols, Options{Raw: true}); err != nil {
			t.Fatal(err)
		}
		if b.String() != c.want {
			t.Errorf("%s: got\n%q\nwant\n%q", c.name, b.String(), c.want)
		}
	}
	p := aggregate.ProcessSnapshot{PID: 7, Comm: "gone", Exited: true, ExitTime: 5_000_000_000, Resident: res(4_600_000_000)}
	p.Resident.Sites = []aggregate.ResidentSite{{Address: 0x1234, StackID: -1, Pages: 16, Bytes: 1 << 20, Stderr: 1000}}
	recs := residentRecords(p, fixtureSymbols, 5_000_000_000, Options{Final: true})
	if len(recs) != 1 {
		t.Fatalf("%d records, want 1", len(recs))
	}
	got, err := json.Marshal(recs[0])
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(got, &m); err != nil {
		t.Fatal(err)
	}
	if m["checked_ns"] != float64(4_600_000_000) {
		t.Errorf("checked_ns = %v, want 4600000000: %s", m["checked_ns"], got)
	}
}
