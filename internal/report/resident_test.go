package report

import (
	"bytes"
	"encoding/json"
	"testing"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/callstack"
	"github.com/memtrace/memtrace/internal/symbolize"
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

// fakeStacks gives each stack ID its frames.
type fakeStacks map[int32][]symbolize.Frame

func (f fakeStacks) Stack(_ uint32, s aggregate.SiteSnapshot) callstack.Stack {
	return callstack.Stack{Frames: f[s.StackID]}
}

// TestResidentDetail: with --detail, two resident rows of one function
// reached by two paths are told apart: each is followed by the rest of its
// stack, and its NDJSON record carries the stack, as callsite records do.
func TestResidentDetail(t *testing.T) {
	fill := symbolize.Frame{Address: 0x1010, Function: "fill", File: "r.c", Line: 3, Module: "/bin/r"}
	from := func(fn string, addr uint64) symbolize.Frame {
		return symbolize.Frame{Address: addr, Function: fn, File: "r.c", Line: int(addr & 0xff), Module: "/bin/r"}
	}
	stacks := fakeStacks{1: {fill, from("from_a", 0x1020)}, 2: {fill, from("from_b", 0x1030)}}
	p := aggregate.ProcessSnapshot{PID: 1, Resident: &aggregate.ResidentSnapshot{SampleBytes: 4096, Pages: 3, Bytes: 12288,
		Sites: []aggregate.ResidentSite{{Address: 0x1010, StackID: 1, Pages: 2, Bytes: 8192}, {Address: 0x1010, StackID: 2, Pages: 1, Bytes: 4096}}}}
	sym := fakeSymbolizer{0x1010: fill}
	var b bytes.Buffer
	if err := writeResidentText(&b, p, sym, Options{Raw: true, Stacks: stacks}); err != nil {
		t.Fatal(err)
	}
	want := "\n  resident by who made it resident (1 write fault sampled per 4096 B of faults): ~12288 B ± 0 B in 3 sampled pages\n" +
		"   ~RESIDENT  ± RESIDENT  PAGES  FUNCTION  FILE:LINE  MODULE\n" +
		"        8192           0      2  fill      r.c:3      r\n" +
		stackIndent + "<- from_a  r.c:32  r\n" +
		"        4096           0      1  fill      r.c:3      r\n" +
		stackIndent + "<- from_b  r.c:48  r\n"
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	recs := residentRecords(p, sym, 1, Options{Stacks: stacks})
	for i, caller := range []string{"from_a", "from_b"} {
		got, _ := json.Marshal(recs[i])
		var m struct {
			Stack []struct {
				Function string `json:"function"`
			} `json:"stack"`
			Truncated *bool `json:"stack_truncated"`
		}
		if err := json.Unmarshal(got, &m); err != nil {
			t.Fatal(err)
		}
		if len(m.Stack) != 2 || m.Stack[0].Function != "fill" || m.Stack[1].Function != caller || m.Truncated == nil || *m.Truncated {
			t.Errorf("record %d: %s; want stack fill <- %s, not truncated", i, got, caller)
		}
	}
	// Without --detail, no stack field.
	if got, _ := json.Marshal(residentRecords(p, sym, 1, Options{})[0]); bytes.Contains(got, []byte(`"stack`)) {
		t.Errorf("a stack without --detail: %s", got)
	}
}
