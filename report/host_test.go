package report

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/aggregate"
	"github.com/memtrace/memtrace/footprint"
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
		if got := objectKeys(t, []byte(l)); !slices.Equal(got, jsonFields[typ]) {
			t.Errorf("%s fields %v, want %v", typ, got, jsonFields[typ])
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

// TestHostResidentText: the resident-only whole-host table gives each
// process's RSS and RssAnon (its footprint) beside the estimate, "-" for a
// process read never, and --sort rss ranks by RSS.
func TestHostResidentText(t *testing.T) {
	res := func(b uint64) *aggregate.ResidentSnapshot {
		return &aggregate.ResidentSnapshot{SampleBytes: 64 * KiB, Pages: b / (64 * KiB), Bytes: b, Stderr: 1000,
			Sites: []aggregate.ResidentSite{{Address: 0x1234, StackID: -1, Pages: b / (64 * KiB), Bytes: b, Stderr: 1000}}}
	}
	s := aggregate.Snapshot{Time: 5e9, Processes: []aggregate.ProcessSnapshot{
		{PID: 10, Comm: "small", Resident: res(2 << 20), Footprint: &footprint.Reading{RSS: 90 << 20, RSSAnon: 80 << 20}},
		{PID: 20, Comm: "big", Resident: res(8 << 20), Footprint: &footprint.Reading{RSS: 30 << 20, RSSAnon: 20 << 20}},
		{PID: 30, Comm: "gone", Resident: res(1 << 20), Exited: true, ExitTime: 4e9},
	}}
	for _, c := range []struct {
		sort SortKey
		want string
	}{
		{SortLive, "processes by resident memory (1 write fault sampled per 65536 B of faults) (all 3):\n" +
			"   PID  COMM        RSS  RSS ANON  ~RESIDENT  ± RESIDENT  PAGES\n" +
			"    20  big    31457280  20971520    8388608        1000    128\n" +
			"    10  small  94371840  83886080    2097152        1000     32\n" +
			"    30  gone          -         -    1048576        1000     16\n" +
			"   pid 30 gone: no pagemap check before it exited: every sampled page made resident over its run\n"},
		{SortRSS, "processes by RSS (1 write fault sampled per 65536 B of faults) (all 3):\n" +
			"   PID  COMM        RSS  RSS ANON  ~RESIDENT  ± RESIDENT  PAGES\n" +
			"    10  small  94371840  83886080    2097152        1000     32\n" +
			"    20  big    31457280  20971520    8388608        1000    128\n" +
			"    30  gone          -         -    1048576        1000     16\n"},
	} {
		var b bytes.Buffer
		if err := WriteText(&b, s, fixtureSymbols, Options{Host: true, ResidentOnly: true, Raw: true, Sort: c.sort, Top: 10}); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), c.want) {
			t.Errorf("sort %s: output lacks %q:\n%s", c.sort, c.want, b.String())
		}
	}
}
