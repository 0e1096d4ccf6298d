package report

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/footprint"
)

// sampledSnapshot is periodicSnapshot as a sampled run would report it.
func sampledSnapshot() aggregate.Snapshot {
	s := periodicSnapshot()
	s.SampleBytes = 512 * KiB
	for i := range s.Processes {
		p := &s.Processes[i]
		p.SampleBytes, p.LiveBytesStderr, p.CountsExact = s.SampleBytes, 123456.4, true
		for j := range p.Sites {
			if p.Sites[j].Category == aggregate.Heap {
				p.Sites[j].LiveBytesStderr = 1000.6
			}
		}
	}
	return s
}

// TestHostJSONLayout: the whole-host layout is the report line, the
// process lines, then every process's heap sites ranked together, then
// mmap sites, each with its pid and comm.
func TestHostJSONLayout(t *testing.T) {
	lines := jsonLines(t, sampledSnapshot(), fixtureSymbols, Options{Top: 3, Host: true})
	var types, order []string
	for _, l := range lines {
		m := decodeLine(t, l)
		typ := m["type"].(string)
		types = append(types, typ)
		if got := objectKeys(t, []byte(l)); !slices.Equal(got, hostFields(typ)) {
			t.Errorf("%s fields %v, want %v", typ, got, hostFields(typ))
		}
		switch typ {
		case "report":
			if m["host"] != true || m["sampled"] != true || m["sample_bytes"].(interface{ String() string }).String() != "524288" {
				t.Errorf("report line %s", l)
			}
		case "callsite":
			order = append(order, m["category"].(string)+":"+m["comm"].(string)+":"+m["address"].(string))
			if m["category"] == "heap" && (m["sampled"] != true || m["live_bytes_stderr"].(interface{ String() string }).String() != "1001") {
				t.Errorf("heap site not marked sampled: %s", l)
			}
			if m["category"] == "mmap" && m["sampled"] != false {
				t.Errorf("mmap site marked sampled: %s", l)
			}
		case "process":
			if m["sampled"] != true || m["live_bytes_stderr"].(interface{ String() string }).String() != "123456" {
				t.Errorf("process not marked sampled: %s", l)
			}
		}
	}
	wantTypes := []string{"report", "process", "process", "callsite", "callsite", "callsite", "callsite"}
	if !slices.Equal(types, wantTypes) {
		t.Errorf("types %v, want %v", types, wantTypes)
	}
	// Heap sites of both processes by live bytes, cut to 3; then the one mmap site.
	wantOrder := []string{"heap:worker:0x7f3a00001234", "heap:myserver:0x401a2b", "heap:worker:0x401a2b", "mmap:worker:0x402200"}
	if !slices.Equal(order, wantOrder) {
		t.Errorf("site order %v, want %v", order, wantOrder)
	}
}

// TestHostExitedListsAll: a report of exited processes lists them all,
// whatever Top says.
func TestHostExitedListsAll(t *testing.T) {
	lines := jsonLines(t, periodicSnapshot(), fixtureSymbols, Options{Top: 1, Host: true, Exited: true, Final: true})
	procs := 0
	for _, l := range lines {
		if strings.Contains(l, `"type":"process"`) {
			procs++
		}
	}
	if procs != 2 {
		t.Errorf("%d process lines, want 2:\n%s", procs, strings.Join(lines, "\n"))
	}
}

// TestHostExitedText: the text summary of the processes that exited
// since the last report counts them all and lists the top Top, by what
// they made resident when none has a footprint reading.
func TestHostExitedText(t *testing.T) {
	var procs []aggregate.ProcessSnapshot
	for i, mib := range []uint64{3, 9, 1, 5} {
		procs = append(procs, aggregate.ProcessSnapshot{PID: uint32(100 + i), Comm: "job", Exited: true, ExitTime: 4e9,
			Resident: &aggregate.ResidentSnapshot{SampleBytes: 64 * KiB, Bytes: mib << 20, Pages: mib * 16, CheckedNS: 4e9}})
	}
	var b bytes.Buffer
	if err := WriteText(&b, aggregate.Snapshot{Time: 5e9, Processes: procs}, fixtureSymbols,
		Options{Top: 2, Host: true, Exited: true, Final: true, ResidentOnly: true}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"=== memtrace: 4 processes exited since the last report, at t=5.000s (monotonic clock) ===\n",
		"processes that exited by memory made resident while traced (1 write fault sampled per 64.0 KiB of faults) (top 2 of 4):\n" +
			"   PID  COMM  ~RESIDENT  ± RESIDENT  PAGES\n" +
			"   101  job     9.0 MiB         0 B    144\n" +
			"   103  job     5.0 MiB         0 B     80\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "RSS to PSS") {
		t.Errorf("footprint legend without footprint columns:\n%s", out)
	}
}

// TestSampledText: estimates are marked, with their standard errors.
func TestSampledText(t *testing.T) {
	for _, o := range []Options{{Top: DefaultTop}, {Top: DefaultTop, Host: true}} {
		var b bytes.Buffer
		if err := WriteText(&b, sampledSnapshot(), fixtureSymbols, o); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		for _, want := range []string{"sampled: 1 sample per 512.0 KiB allocated on average", "~LIVE", "± LIVE", "~BLOCKS", "1001 B"} {
			if !strings.Contains(out, want) {
				t.Errorf("host=%v: output lacks %q:\n%s", o.Host, want, out)
			}
		}
		if o.Host && !strings.Contains(out, "heap call sites across the host by live bytes (all 5):") {
			t.Errorf("no host-wide site table:\n%s", out)
		}
		if !o.Host && !strings.Contains(out, "live:        ~2.0 MiB ± 120.6 KiB in ~12 blocks") {
			t.Errorf("process header not marked:\n%s", out)
		}
	}
}

// withPeaks gives s's processes peak snapshots and marks: myserver's peak
// held 1.25 MiB at two sites, worker's 2 MiB at one.
func withPeaks(s aggregate.Snapshot) aggregate.Snapshot {
	for i := range s.Processes {
		p := &s.Processes[i]
		pk := &aggregate.PeakSnapshot{Time: 4_000_000_000, Tolerance: 12 * KiB, Snapshots: 7, LiveBytesStderr: 2000.4}
		if p.PID == 4242 {
			pk.Sites = []aggregate.SiteSnapshot{
				{Address: addrMakeBuffer, Category: aggregate.Heap, Stats: aggregate.Stats{Allocs: 12, AllocBytes: 1 * MiB, LiveAllocs: 12, LiveBytes: 1 * MiB}, LiveBytesStderr: 10},
				{Address: addrParse, Category: aggregate.Heap, Stats: aggregate.Stats{Allocs: 9, AllocBytes: 256 * KiB, LiveAllocs: 1, LiveBytes: 256 * KiB}, LiveBytesStderr: 20},
			}
		} else {
			pk.Sites = []aggregate.SiteSnapshot{
				{Address: addrLibfoo, Category: aggregate.Heap, Stats: aggregate.Stats{Allocs: 20, AllocBytes: 2 * MiB, LiveAllocs: 20, LiveBytes: 2 * MiB}, LiveBytesStderr: 30},
			}
		}
		for _, site := range pk.Sites {
			pk.LiveBytes += site.LiveBytes
		}
		p.Peak = pk
	}
	s.Marks = []aggregate.Mark{{PID: 77, Label: "start", Seq: 1, Time: 1e9}, {PID: 4242, Label: "loaded", Seq: 1, Time: 2e9},
		{PID: 77, Label: "done", Seq: 2, Time: 3e9}}
	return s
}

// TestHostJSONPeaks: each listed process's peak line and its
// peak_callsite lines (at most Top, by live bytes) follow the call
// sites; the listed processes' marks follow the report line; sampled
// figures are marked.
func TestHostJSONPeaks(t *testing.T) {
	lines := jsonLines(t, withPeaks(sampledSnapshot()), fixtureSymbols, Options{Top: 1, Host: true})
	var got []string
	for _, l := range lines {
		m := decodeLine(t, l)
		typ := m["type"].(string)
		rec := typ
		switch typ {
		case "mark":
			rec += ":" + m["label"].(string)
		case "peak":
			if keys := objectKeys(t, []byte(l)); !slices.Equal(keys, jsonFields["peak"]) {
				t.Errorf("peak fields %v, want %v", keys, jsonFields["peak"])
			}
			if m["sampled"] != true || m["live_bytes_stderr"].(interface{ String() string }).String() != "2000" ||
				m["live_bytes"].(interface{ String() string }).String() != "2097152" {
				t.Errorf("peak line %s", l)
			}
			rec += ":" + m["comm"].(string)
		case "peak_callsite":
			if keys := objectKeys(t, []byte(l)); !slices.Equal(keys, jsonFields["callsite"]) {
				t.Errorf("peak_callsite fields %v, want those of callsite", keys)
			}
			if m["sampled"] != true || m["live_bytes_stderr"].(interface{ String() string }).String() != "30" || m["comm"] != "worker" {
				t.Errorf("peak_callsite line %s", l)
			}
			rec += ":" + m["address"].(string)
		}
		got = append(got, rec)
	}
	// Top 1: worker leads by live bytes; only its peak and top peak site.
	want := []string{"report", "mark:start", "mark:done", "process", "callsite", "callsite", "peak:worker", "peak_callsite:0x7f3a00001234"}
	if !slices.Equal(got, want) {
		t.Errorf("records %v, want %v", got, want)
	}
}

// TestHostTextPeaks: the "at the peak" section ranks processes by peak
// live bytes, cut to Top, then their sites at the peak ranked together;
// sampled figures are marked; the listed processes' last Top marks end
// the report.
func TestHostTextPeaks(t *testing.T) {
	var b bytes.Buffer
	if err := WriteText(&b, withPeaks(sampledSnapshot()), fixtureSymbols, Options{Top: 2, Host: true, Raw: true}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"  at the peak: processes by peak live bytes (all 2):\n" +
			"    PID  COMM      ~PEAK LIVE  ~LIVE AT SNAPSHOT  ± LIVE  TOLERANCE  SNAPSHOTS  TAKEN AT\n" +
			"     77  worker       2199552            2097152    2000      12288          7  t=4.000s\n" +
			"   4242  myserver     1310720            1310720    2000      12288          7  t=4.000s\n",
		"  heap call sites live at those peaks, by live bytes at the peak (top 2 of 3):\n",
		"     77  worker    2097152      30       20     2097152      20       0  [unknown] libfoo.so.1+0x1234",
		"   4242  myserver  1048576      10       12     1048576      12       0  make_buffer(unsigned long)",
		"  marks of those processes (last 2 of 3):\n" +
			"    pid 4242 myserver #1 \"loaded\" at t=2.000s\n" +
			"    pid 77 worker #2 \"done\" at t=3.000s\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
}

// TestSampledPeakText: with -p and --, a sampled peak's figures are
// marked as estimates too, with the standard error at the snapshot.
func TestSampledPeakText(t *testing.T) {
	var b bytes.Buffer
	if err := WriteText(&b, withPeaks(sampledSnapshot()), fixtureSymbols, Options{Top: DefaultTop}); err != nil {
		t.Fatal(err)
	}
	want := "  at the peak, t=4.000s: live ~2.0 MiB ± 2.0 KiB, within 12.0 KiB of the peak ~2.1 MiB (7 snapshots taken)\n"
	if out := b.String(); !strings.Contains(out, want) || !strings.Contains(out, "heap call sites live at the peak (all 1):") {
		t.Errorf("output lacks %q:\n%s", want, out)
	}
}

// TestHostList: the whole host's list gives every process, traced or
// not, its footprint ("-" for one never read) beside the estimate ("-"
// for one with no fault sampled), ranked by the footprint key --sort
// names (RSS for any other key), cut to Top.
func TestHostList(t *testing.T) {
	res := func(b uint64) *aggregate.ResidentSnapshot {
		return &aggregate.ResidentSnapshot{SampleBytes: 64 * KiB, Pages: b / (64 * KiB), Bytes: b, Stderr: 1000,
			Sites: []aggregate.ResidentSite{{Address: 0x1234, StackID: -1, Pages: b / (64 * KiB), Bytes: b, Stderr: 1000}}}
	}
	fp := func(anon, file, swap, pss uint64) *footprint.Reading {
		return &footprint.Reading{RSS: anon + file, RSSAnon: anon, RSSFile: file, Swap: swap, PSS: pss}
	}
	s := aggregate.Snapshot{Time: 5e9, Processes: []aggregate.ProcessSnapshot{
		{PID: 10, Comm: "small", Resident: res(2 << 20), Footprint: fp(80<<20, 10<<20, 0, 50<<20)},
		{PID: 20, Comm: "big", Resident: res(8 << 20), Footprint: fp(20<<20, 10<<20, 1<<20, 25<<20)},
		{PID: 30, Comm: "gone", Resident: res(1 << 20), Exited: true, ExitTime: 4e9},
		{PID: 40, Comm: "idle", Untraced: true, Footprint: fp(100<<20, 1<<20, 3<<20, 101<<20)},
	}}
	// Columns are compared by their fields: widths follow the rows shown.
	const head = "PID COMM RSS ANON FILE SHMEM SWAP PSS ~RESIDENT ± RESIDENT PAGES"
	rows := map[uint32]string{
		10: "10 small 94371840 83886080 10485760 0 0 52428800 2097152 1000 32",
		20: "20 big 31457280 20971520 10485760 0 1048576 26214400 8388608 1000 128",
		30: "30 gone - - - - - - 1048576 1000 16",
		40: "40 idle 105906176 104857600 1048576 0 3145728 105906176 - - -",
	}
	for _, c := range []struct {
		sort  SortKey
		top   int
		title string
		order []uint32
	}{
		{SortLive, 0, "processes by RSS", []uint32{40, 10, 20, 30}},
		{SortRSS, 2, "processes by RSS", []uint32{40, 10}},
		{SortAnon, 0, "processes by anonymous RSS", []uint32{40, 10, 20, 30}},
		{SortSwap, 0, "processes by swap", []uint32{40, 20, 10, 30}},
		{SortPSS, 0, "processes by PSS", []uint32{40, 10, 20, 30}},
		{SortResident, 3, "processes by memory made resident while traced", []uint32{20, 10, 30}},
	} {
		var b bytes.Buffer
		if err := WriteText(&b, s, fixtureSymbols, Options{Host: true, ResidentOnly: true, Raw: true, Sort: c.sort, Top: c.top}); err != nil {
			t.Fatal(err)
		}
		want := []string{shownOf(c.title+" (1 write fault sampled per 65536 B of faults)", len(c.order), 4), head}
		for _, pid := range c.order {
			want = append(want, rows[pid])
		}
		want = append(want, "RSS to PSS: the kernel's figures, now (a process that exited: at its last reading)",
			"~RESIDENT: only what became resident while memtrace watched, from sampled write faults; - none sampled")
		if slices.Contains(c.order, 30) {
			want = append(want, "pid 30 gone: no pagemap check before it exited: every sampled page made resident over its run")
		}
		out := b.String()
		var got []string
		for l := range strings.Lines(out[strings.Index(out, "\n\n")+2:]) {
			if strings.TrimSpace(l) == "" {
				break
			}
			got = append(got, strings.Join(strings.Fields(l), " "))
		}
		if !slices.Equal(got, want) {
			t.Errorf("sort %s top %d: list\n%s\nwant\n%s", c.sort, c.top, strings.Join(got, "\n"), strings.Join(want, "\n"))
		}
		if !strings.Contains(out, "whole host: 4 processes, 3 traced (memtrace saw their faults or allocations)\n") {
			t.Errorf("sort %s: no count of processes:\n%s", c.sort, out)
		}
	}
}

// TestHostJSONList: whole-host process records are the list's and the
// allocator table's processes, by rank, each with its footprint; an
// untraced one says so.
func TestHostJSONList(t *testing.T) {
	s := periodicSnapshot()
	s.Processes = append(s.Processes, aggregate.ProcessSnapshot{PID: 9, Comm: "idle", Untraced: true,
		Footprint: &footprint.Reading{RSS: 100 << 20, RSSAnon: 100 << 20, PSS: 90 << 20}})
	var got []string
	for _, l := range jsonLines(t, s, fixtureSymbols, Options{Top: 2, Host: true}) {
		m := decodeLine(t, l)
		switch m["type"] {
		case "report":
			got = append(got, "report:"+m["processes"].(interface{ String() string }).String())
		case "process":
			f := m["footprint"].(map[string]any)
			got = append(got, fmt.Sprintf("%v:%v:%v:%v:%v", m["rank"], m["comm"], m["traced"], f["rss_bytes"], f["pss_bytes"]))
		}
	}
	// idle leads by RSS; worker beats myserver (no footprint) by live
	// bytes; myserver is shown too, in the allocator table's top 2.
	want := []string{"report:3", "1:idle:false:104857600:94371840", "2:worker:true:0:0", "3:myserver:true:0:0"}
	if !slices.Equal(got, want) {
		t.Errorf("records %v, want %v", got, want)
	}
	// Top 1, another untraced process second by RSS: the allocator
	// table's worker keeps its rank in the list uncut, 3.
	s.Processes = append(s.Processes, aggregate.ProcessSnapshot{PID: 8, Comm: "idle2", Untraced: true,
		Footprint: &footprint.Reading{RSS: 50 << 20, RSSAnon: 50 << 20}})
	got = nil
	for _, l := range jsonLines(t, s, fixtureSymbols, Options{Top: 1, Host: true}) {
		if m := decodeLine(t, l); m["type"] == "process" {
			got = append(got, fmt.Sprintf("%v:%v", m["rank"], m["comm"]))
		}
	}
	if want := []string{"1:idle", "3:worker"}; !slices.Equal(got, want) {
		t.Errorf("top 1: records %v, want %v", got, want)
	}
}
