package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"

	"github.com/memtrace/memtrace/internal/recording"
	"github.com/memtrace/memtrace/internal/testwait"
)

// testdata/phases.c, in MiB at scale 1: take_and_free 30 allocated and
// freed; hold_a 20 and hold_b 15 live together (the peak, 35); both freed;
// keep 32 kept. Blocks of 256 KiB. Marks after each phase.
const mib = 1 << 20

var phaseMarks = []string{"churn", "peak", "released", "phase_number", "kept"}

// phaseSites is what each function of the fixture did by the end, at scale.
func phaseSites(scale uint64) map[string]siteTotals {
	b := func(n uint64) uint64 { return n * scale * mib }
	return map[string]siteTotals{
		"heap:take_and_free": {Allocs: 120, AllocBytes: b(30), Frees: 120, FreedBytes: b(30)},
		"heap:hold_a":        {Allocs: 80, AllocBytes: b(20), Frees: 80, FreedBytes: b(20)},
		"heap:hold_b":        {Allocs: 60, AllocBytes: b(15), Frees: 60, FreedBytes: b(15)},
		"heap:keep":          {Allocs: 128, AllocBytes: b(32), LiveAllocs: 128, LiveBytes: b(32)},
	}
}

// timeRecord holds the fields of mark, peak and peak_callsite records.
type timeRecord struct {
	Type           string `json:"type"`
	PID            int    `json:"pid"`
	Label          string `json:"label"`
	Seq            uint64 `json:"seq"`
	Function       string `json:"function"`
	LiveBytes      uint64 `json:"live_bytes"`
	LiveAllocs     uint64 `json:"live_allocs"`
	PeakLiveBytes  uint64 `json:"peak_live_bytes"`
	ToleranceBytes uint64 `json:"tolerance_bytes"`
	Snapshots      uint64 `json:"snapshots"`
	Final          bool   `json:"final"`
}

func timeRecords(t *testing.T, out, typ string) []timeRecord {
	t.Helper()
	var recs []timeRecord
	for l := range strings.Lines(out) {
		var r timeRecord
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("not JSON: %q", l)
		}
		if r.Type == typ {
			recs = append(recs, r)
		}
	}
	return recs
}

// heapSites is byFunction for every site record of out (final or not),
// heap only: a replay --at report is not final.
func heapSites(t *testing.T, out string) map[string]siteTotals {
	t.Helper()
	r := parseNDJSON(t, out)
	for i := range r.sites {
		r.sites[i].Final = true
	}
	return r.byFunction(r.sites[0].PID)
}

func TestTimeRecordReplay(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "phases.c")
	dir := t.TempDir()
	rec := filepath.Join(dir, "run.rec")
	dumps := filepath.Join(dir, "dumps")
	if err := os.Mkdir(dumps, 0o755); err != nil {
		t.Fatal(err)
	}
	live := runMemtrace(t, "--json", "--record", rec, "--dump-dir", dumps, "--mark", "memtrace_mark",
		"--mark", "phase_number", "--", bin)
	if live.code != 0 {
		t.Fatalf("exit %d\n%s", live.code, live.stderr)
	}
	liveSites := parseNDJSON(t, live.stdout)
	pid := liveSites.finalProcess(t).PID
	if got, want := liveSites.byFunction(pid), phaseSites(1); !maps_equal(got, want) {
		t.Fatalf("live sites %v, want %v", got, want)
	}

	t.Run("marks", func(t *testing.T) {
		var labels []string
		for _, m := range timeRecords(t, live.stdout, "mark") {
			labels = append(labels, m.Label)
		}
		// Each written when seen, then listed again in the final report.
		if want := slices.Concat(phaseMarks, phaseMarks); !slices.Equal(labels, want) {
			t.Errorf("mark labels %q, want %q", labels, want)
		}
	})

	t.Run("replay final equals live final", func(t *testing.T) {
		r := runMemtrace(t, "replay", "--json", rec)
		if r.code != 0 {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
		// The whole stream: the marks, written as each was seen, then the
		// final report.
		if got, want := strip(t, r.stdout), strip(t, live.stdout); got != want {
			t.Errorf("replay differs from the live run\nreplay:\n%s\nlive:\n%s", got, want)
		}
		text := runMemtrace(t, "replay", rec)
		if !strings.Contains(text.stdout, "FINAL report") || !strings.Contains(text.stdout, "at the peak") {
			t.Errorf("text replay lacks the final banner or the peak table:\n%s", text.stdout)
		}
	})

	t.Run("peak within tolerance", func(t *testing.T) {
		for _, tc := range []struct {
			name string
			out  string
			tol  uint64
		}{
			{"live, 1%", live.stdout, 35 * mib / 100},
			{"replay, 0", runMemtrace(t, "replay", "--json", "--peak-tolerance", "0", rec).stdout, 0},
			{"replay, 1MiB", runMemtrace(t, "replay", "--json", "--peak-tolerance", "1MiB", rec).stdout, mib},
		} {
			peaks := timeRecords(t, tc.out, "peak")
			if len(peaks) != 1 {
				t.Fatalf("%s: %d peak records", tc.name, len(peaks))
			}
			pk := peaks[0]
			if pk.PeakLiveBytes != 35*mib || pk.ToleranceBytes != tc.tol || pk.LiveBytes+pk.ToleranceBytes < pk.PeakLiveBytes || pk.LiveBytes > pk.PeakLiveBytes {
				t.Errorf("%s: peak %+v, want live within %d of %d", tc.name, pk, tc.tol, 35*mib)
			}
			var sum uint64
			for _, s := range timeRecords(t, tc.out, "peak_callsite") {
				sum += s.LiveBytes
				want := map[string]uint64{"hold_a": 20 * mib, "hold_b": 15 * mib}[s.Function]
				if s.LiveBytes > want || s.LiveBytes+tc.tol < want {
					t.Errorf("%s: %s live %d at the peak, want within %d of %d", tc.name, s.Function, s.LiveBytes, tc.tol, want)
				}
			}
			if sum != pk.LiveBytes {
				t.Errorf("%s: peak sites hold %d, the peak record %d", tc.name, sum, pk.LiveBytes)
			}
			t.Logf("%s: %d snapshots, live %d at the peak", tc.name, pk.Snapshots, pk.LiveBytes)
		}
	})

	t.Run("replay at", func(t *testing.T) {
		all := phaseSites(1)
		for _, tc := range []struct {
			at   string
			want map[string]siteTotals
		}{
			{"mark:churn", map[string]siteTotals{"heap:take_and_free": all["heap:take_and_free"]}},
			{"mark:peak", map[string]siteTotals{"heap:take_and_free": all["heap:take_and_free"],
				"heap:hold_a": {Allocs: 80, AllocBytes: 20 * mib, LiveAllocs: 80, LiveBytes: 20 * mib},
				"heap:hold_b": {Allocs: 60, AllocBytes: 15 * mib, LiveAllocs: 60, LiveBytes: 15 * mib}}},
			{"mark:released#1", map[string]siteTotals{"heap:take_and_free": all["heap:take_and_free"],
				"heap:hold_a": all["heap:hold_a"], "heap:hold_b": all["heap:hold_b"]}},
			{"mark:kept", all},
		} {
			r := runMemtrace(t, "replay", "--json", "--at", tc.at, rec)
			if r.code != 0 {
				t.Fatalf("--at %s: exit %d\n%s", tc.at, r.code, r.stderr)
			}
			if got := heapSites(t, r.stdout); !maps_equal(got, tc.want) {
				t.Errorf("--at %s: sites %v, want %v", tc.at, got, tc.want)
			}
		}
		pk := runMemtrace(t, "replay", "--json", "--at", "peak", rec)
		p := parseNDJSON(t, pk.stdout).procs[0]
		if p.LiveBytes > 35*mib || p.LiveBytes < 35*mib-35*mib/100 {
			t.Errorf("--at peak: live %d, want within 1%% of %d", p.LiveBytes, 35*mib)
		}
		if r := runMemtrace(t, "replay", "--at", "mark:peak#2", rec); r.code != exitUsage || !strings.Contains(r.stderr, `1 marks labelled "peak"`) {
			t.Errorf("--at mark:peak#2: exit %d, stderr %q", r.code, r.stderr)
		}
	})

	t.Run("dumps", func(t *testing.T) {
		files, _ := filepath.Glob(filepath.Join(dumps, "*"))
		var want []string
		for i := 1; i <= len(phaseMarks)+1; i++ {
			want = append(want, filepath.Join(dumps, fmt.Sprintf("memtrace-%04d.ndjson", i)))
		}
		if !slices.Equal(files, want) {
			t.Fatalf("dumps %q, want %q", files, want)
		}
		sums := map[string]siteTotals{}
		var total siteTotals
		for i, f := range files {
			b, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			var last epochLine
			for l := range strings.Lines(string(b)) {
				var e epochLine
				json.Unmarshal([]byte(l), &e)
				switch e.Type {
				case "report":
					if e.Epoch != i+1 {
						t.Errorf("%s: epoch %d", f, e.Epoch)
					}
				case "process":
					total = total.plus(e)
				case "callsite":
					sums[e.Category+":"+e.Function] = sums[e.Category+":"+e.Function].plus(e)
				case "mark":
					// Each mark ends an epoch: dump i lists mark i.
					if i < len(phaseMarks) && e.Label != phaseMarks[i] {
						t.Errorf("%s lists mark %q, want %q", f, e.Label, phaseMarks[i])
					}
				}
				last = e
			}
			_ = last
		}
		want2 := phaseSites(1)
		for k, w := range want2 {
			got := sums[k]
			if got.Allocs != w.Allocs || got.AllocBytes != w.AllocBytes || got.Frees != w.Frees || got.FreedBytes != w.FreedBytes {
				t.Errorf("%s: epoch figures add up to %+v, want %+v", k, got, w)
			}
		}
		if total.Allocs != 388 || total.AllocBytes != 97*mib || total.Frees != 260 || total.FreedBytes != 65*mib {
			t.Errorf("process epoch figures add up to %+v", total)
		}
	})

	t.Run("diff", func(t *testing.T) {
		rec2 := filepath.Join(dir, "run2.rec")
		if r := runMemtrace(t, "--record", rec2, "-o", os.DevNull, "--", bin, "2"); r.code != 0 {
			t.Fatalf("exit %d\n%s", r.code, r.stderr)
		}
		for _, old := range []string{rec, writeFile(t, filepath.Join(dir, "live.ndjson"), live.stdout)} {
			d := runMemtrace(t, "diff", "--json", old, rec2)
			if d.code != 0 {
				t.Fatalf("diff: exit %d\n%s", d.code, d.stderr)
			}
			one, two := phaseSites(1), phaseSites(2)
			seen := 0
			for l := range strings.Lines(d.stdout) {
				var c diffLine
				json.Unmarshal([]byte(l), &c)
				if c.Type != "callsite_diff" {
					continue
				}
				k := c.Category + ":" + c.Function
				seen++
				o, n := one[k], two[k]
				if c.Module != filepath.Base(bin) || c.LiveBytes != int64(n.LiveBytes) || c.LiveBytesDelta != int64(n.LiveBytes)-int64(o.LiveBytes) ||
					c.AllocBytesDelta != int64(n.AllocBytes)-int64(o.AllocBytes) || c.AllocsDelta != 0 ||
					c.FreedBytesDelta != int64(n.FreedBytes)-int64(o.FreedBytes) || c.FreesDelta != 0 || c.LiveAllocsDelta != 0 {
					t.Errorf("diff %s: %+v, want %+v then %+v", k, c, o, n)
				}
			}
			if seen != 4 {
				t.Errorf("diff has %d call sites, want 4:\n%s", seen, d.stdout)
			}
		}
		if d := runMemtrace(t, "diff", "--fail-on-growth", "32MiB", rec, rec2); d.code != 0 {
			t.Errorf("growth of exactly 32 MiB failed --fail-on-growth 32MiB: exit %d", d.code)
		}
		if d := runMemtrace(t, "diff", "--fail-on-growth", "1M", rec, rec2); d.code != exitGrowth {
			t.Errorf("growth of 32 MiB: exit %d, want %d", d.code, exitGrowth)
		}
	})
}

// A run killed while recording leaves a readable prefix: replay reports
// it and says the file is truncated.
func TestTimeKilledRecording(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "phases.c")
	rec := filepath.Join(t.TempDir(), "killed.rec")
	cmd := exec.Command(memtrace(t), "--json", "--record", rec, "--mark", "memtrace_mark", "--", bin, "1", "hold")
	stdout, _ := cmd.StdoutPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	// The mark "kept" is flushed to the file when it is seen.
	lines := bufio.NewScanner(stdout)
	for lines.Scan() {
		if strings.Contains(lines.Text(), `"label":"kept"`) {
			break
		}
	}
	// Killed once the file holds the mark: the prefix then holds every
	// record before it.
	testwait.For(t, `the mark "kept" in the recording`, func() bool { return recordedMark(rec, "kept") })
	cmd.Process.Signal(syscall.SIGKILL)
	cmd.Wait()
	exec.Command("pkill", "-KILL", "-f", bin+" 1 hold").Run()

	r := runMemtrace(t, "replay", "--json", rec)
	if r.code != exitError || !strings.Contains(r.stderr, "truncated") {
		t.Fatalf("exit %d, stderr %q: want %d and a truncation error", r.code, r.stderr, exitError)
	}
	got := heapSites(t, r.stdout)
	if want := phaseSites(1); !maps_equal(got, want) {
		t.Errorf("prefix sites %v, want %v", got, want)
	}
}

// recordedMark says whether the recording at path, maybe still being
// written, holds a mark labelled label.
func recordedMark(path, label string) bool {
	r, err := recording.Open(path)
	if err != nil {
		return false
	}
	defer r.Close()
	var rec recording.Record
	for r.Next(&rec) == nil {
		if rec.Kind == recording.KindMark && rec.Mark.Label == label {
			return true
		}
	}
	return false
}

type epochLine struct {
	Type            string `json:"type"`
	Epoch           int    `json:"epoch"`
	Label           string `json:"label"`
	Category        string `json:"category"`
	Function        string `json:"function"`
	EpochAllocs     uint64 `json:"epoch_allocs"`
	EpochAllocBytes uint64 `json:"epoch_alloc_bytes"`
	EpochFrees      uint64 `json:"epoch_frees"`
	EpochFreedBytes uint64 `json:"epoch_freed_bytes"`
}

func (s siteTotals) plus(e epochLine) siteTotals {
	s.Allocs += e.EpochAllocs
	s.AllocBytes += e.EpochAllocBytes
	s.Frees += e.EpochFrees
	s.FreedBytes += e.EpochFreedBytes
	return s
}

type diffLine struct {
	Type            string `json:"type"`
	Category        string `json:"category"`
	Function        string `json:"function"`
	Module          string `json:"module"`
	LiveBytes       int64  `json:"live_bytes"`
	LiveBytesDelta  int64  `json:"live_bytes_delta"`
	LiveAllocsDelta int64  `json:"live_allocs_delta"`
	AllocsDelta     int64  `json:"allocs_delta"`
	AllocBytesDelta int64  `json:"alloc_bytes_delta"`
	FreesDelta      int64  `json:"frees_delta"`
	FreedBytesDelta int64  `json:"freed_bytes_delta"`
}

func maps_equal(a, b map[string]siteTotals) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func writeFile(t *testing.T, path, s string) string {
	t.Helper()
	if err := os.WriteFile(path, []byte(s), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

// liveFinal is the final report of a live NDJSON output: from its last
// report line on (the marks written when seen come before it).
func liveFinal(out string) string {
	i := strings.LastIndex(out, `{"type":"report"`)
	return out[i:]
}

// strip normalizes NDJSON (a recorded run's leak check replays too, so
// every field is compared).
func strip(t *testing.T, out string) string {
	t.Helper()
	var b strings.Builder
	for l := range strings.Lines(out) {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("not JSON: %q", l)
		}
		if m["type"] == "report" {
			// memtrace's own memory: the live run's, 0 in a replay.
			delete(m, "memtrace_peak_rss_bytes")
			delete(m, "memtrace_rss_bytes")
		}
		js, _ := json.Marshal(m)
		b.Write(js)
		b.WriteByte('\n')
	}
	return b.String()
}

// A --detail recording replays with its stacks: the report is the live one.
func TestTimeReplayDetail(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "stacks.c", "-fno-omit-frame-pointer")
	rec := filepath.Join(t.TempDir(), "detail.rec")
	live := runMemtrace(t, "--json", "--detail", "--top", "0", "--record", rec, "--", bin)
	if live.code != 0 {
		t.Fatalf("exit %d\n%s", live.code, live.stderr)
	}
	r := runMemtrace(t, "replay", "--json", "--detail", "--top", "0", rec)
	if r.code != 0 {
		t.Fatalf("replay: exit %d\n%s", r.code, r.stderr)
	}
	if got, want := strip(t, r.stdout), strip(t, liveFinal(live.stdout)); got != want || !strings.Contains(got, `"stack":[{`) {
		t.Errorf("replay --detail differs from the live report\nreplay:\n%s\nlive:\n%s", got, want)
	}
}
