package main

import (
	"encoding/json"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/event"
)

// The whole-host mode's marks and peak snapshots, with real BPF, on
// testdata/phases.c run chroot'ed on its own copy of libc under a name of
// its own (--comm), as in TestHostShortLived.

// hostPeakRecord adds to timeRecord (e2e_time_test.go) what the
// whole-host records carry too.
type hostPeakRecord struct {
	timeRecord
	Comm            string `json:"comm"`
	Sampled         bool   `json:"sampled"`
	SampleBytes     uint64 `json:"sample_bytes"`
	LiveBytesStderr uint64 `json:"live_bytes_stderr"`
}

// hostTimeRecords returns pid's records of type typ, in order.
func hostTimeRecords(t *testing.T, out, typ string, pid int) []hostPeakRecord {
	t.Helper()
	var recs []hostPeakRecord
	for l := range strings.Lines(out) {
		var r hostPeakRecord
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatalf("not JSON: %q", l)
		}
		if r.Type == typ && r.PID == pid {
			recs = append(recs, r)
		}
	}
	return recs
}

// expectedPhasesPeak is the peak snapshot the default tolerance keeps of
// phases.c at scale 1: the rule applied by an aggregate.Table to the
// fixture's allocations, in order (heap sites by function).
func expectedPhasesPeak() (live uint64, snapshots uint64, sites map[string]uint64) {
	tb := aggregate.NewTable()
	fns := map[uint64]string{1: "take_and_free", 2: "hold_a", 3: "hold_b", 4: "keep"}
	addr, now := uint64(0x100000), uint64(1)
	alloc := func(site uint64) uint64 {
		addr += 1 << 20
		now++
		tb.Apply(&event.Event{PID: 1, Kind: event.Alloc, Addr: addr, Size: mib / 4, CallSite: site, StackID: -1, Time: now})
		return addr
	}
	free := func(a uint64) {
		now++
		tb.Apply(&event.Event{PID: 1, Kind: event.Free, Addr: a, Time: now})
	}
	for range 120 {
		free(alloc(1))
	}
	var held []uint64
	for range 80 {
		held = append(held, alloc(2))
	}
	for range 60 {
		held = append(held, alloc(3))
	}
	for _, a := range held {
		free(a)
	}
	for range 128 {
		alloc(4)
	}
	pk := tb.Snapshot().Processes[0].Peak
	sites = map[string]uint64{}
	for _, s := range pk.Sites {
		sites[fns[s.Address]] = s.LiveBytes
	}
	return pk.LiveBytes, pk.Snapshots, sites
}

// runHostPhases starts a whole-host memtrace with args on mt-hostphases,
// primes it (a first run, killed once memtrace probed its libc and its
// mark functions: the files are then probed before the measured run
// starts) and runs phases.c once; it returns memtrace's stdout and the
// measured run's pid.
func runHostPhases(t *testing.T, args ...string) (string, int) {
	t.Helper()
	bin := fixture(t, "phases.c")
	root := chrootWithOwnLibc(t, bin, "mt-hostphases") // e2e_host_test.go
	h := startHost(t, append([]string{"--comm", "mt-hostphases", "--top", "0",
		"--mark", "memtrace_mark", "--mark", "phase_number"}, args...)...)
	primer := exec.Command("chroot", root, "/mt-hostphases", "1", "hold")
	if err := primer.Start(); err != nil {
		t.Fatal(err)
	}
	// The allocator's probes are attached before the mark probes (host.Finder).
	h.waitFor(t, `msg="mark probed" pid=`+strconv.Itoa(primer.Process.Pid)+" function=memtrace_mark")
	primer.Process.Kill()
	primer.Wait()
	run := exec.Command("chroot", root, "/mt-hostphases")
	if out, err := run.CombinedOutput(); err != nil {
		t.Fatalf("fixture: %v\n%s", err, out)
	}
	h.waitExitsHeld(t, run.Process.Pid)
	h.stop(t)
	return h.stdout.String(), run.Process.Pid
}

// TestHostMarksAndPeak: in the whole-host mode a process's marks are
// seen with their labels, in order (written when seen, then listed again
// with its final records at its exit), and its final records carry its
// peak snapshot, exactly as the tolerance rule keeps it.
func TestHostMarksAndPeak(t *testing.T) {
	needBPF(t)
	rec := filepath.Join(t.TempDir(), "host.rec")
	out, pid := runHostPhases(t, "--sample-bytes", "0", "--record", rec)

	var labels []string
	for i, m := range hostTimeRecords(t, out, "mark", pid) {
		labels = append(labels, m.Label)
		if want := uint64(i%len(phaseMarks) + 1); m.Seq != want {
			t.Errorf("mark %q: seq %d, want %d", m.Label, m.Seq, want)
		}
	}
	if want := slices.Concat(phaseMarks, phaseMarks); !slices.Equal(labels, want) {
		t.Errorf("marks of pid %d: %q, want %q\n%s", pid, labels, want, out)
	}

	r := parseNDJSON(t, out)
	if got, want := r.byFunction(pid), phaseSites(1); !maps_equal(got, want) {
		t.Errorf("final sites %v, want %v", got, want)
	}
	live, snapshots, sites := expectedPhasesPeak()
	peaks := hostTimeRecords(t, out, "peak", pid)
	if len(peaks) != 1 {
		t.Fatalf("%d peak records of pid %d, want 1:\n%s", len(peaks), pid, out)
	}
	pk := peaks[0]
	want := hostPeakRecord{timeRecord: timeRecord{Type: "peak", PID: pid, LiveBytes: live, PeakLiveBytes: 35 * mib,
		ToleranceBytes: 35 * mib / 100, Snapshots: snapshots, Final: true}, Comm: "mt-hostphases"}
	if pk != want {
		t.Errorf("peak record %+v, want %+v", pk, want)
	}
	got := map[string]uint64{}
	for _, s := range hostTimeRecords(t, out, "peak_callsite", pid) {
		got[s.Function] += s.LiveBytes
		if s.Comm != "mt-hostphases" || !s.Final || s.Sampled {
			t.Errorf("peak_callsite %+v: want comm mt-hostphases, final, exact", s)
		}
	}
	if len(got) != len(sites) || got["hold_a"] != sites["hold_a"] || got["hold_b"] != sites["hold_b"] {
		t.Errorf("live at the peak by function %v, want %v", got, sites)
	}
	t.Logf("peak: live %d of %d (%d snapshots): %v", pk.LiveBytes, pk.PeakLiveBytes, pk.Snapshots, got)

	// The recording has the marks, and its replay as of the last one the
	// same peak (nothing was allocated after it).
	r2 := runMemtrace(t, "replay", "--json", "--top", "0", "--at", "mark:kept", rec)
	if r2.code != 0 {
		t.Fatalf("replay: exit %d\n%s", r2.code, r2.stderr)
	}
	labels = nil
	for _, m := range hostTimeRecords(t, r2.stdout, "mark", pid) {
		labels = append(labels, m.Label)
	}
	if !slices.Equal(labels, phaseMarks) {
		t.Errorf("replayed marks %q, want %q", labels, phaseMarks)
	}
	want.Final = false // a report as of a mark
	if peaks := hostTimeRecords(t, r2.stdout, "peak", pid); len(peaks) != 1 || peaks[0] != want {
		t.Errorf("replayed peak records %+v, want %+v", peaks, want)
	}
}

// TestHostPeakSampled: in sampled mode (the whole-host default) the peak
// records say their figures are estimates, with standard errors, and
// keep the tolerance rule's bound.
func TestHostPeakSampled(t *testing.T) {
	needBPF(t)
	out, pid := runHostPhases(t)
	peaks := hostTimeRecords(t, out, "peak", pid)
	if len(peaks) != 1 {
		t.Fatalf("%d peak records of pid %d, want 1:\n%s", len(peaks), pid, out)
	}
	pk := peaks[0]
	if !pk.Sampled || pk.SampleBytes != 512<<10 || !pk.Final || pk.PeakLiveBytes == 0 || pk.LiveBytesStderr == 0 ||
		pk.LiveBytes > pk.PeakLiveBytes || pk.LiveBytes+pk.ToleranceBytes < pk.PeakLiveBytes || pk.ToleranceBytes != pk.PeakLiveBytes/100 {
		t.Errorf("peak record %+v: want sampled (524288), final, live within 1%% of the peak, with its standard error", pk)
	}
	var sum uint64
	for _, s := range hostTimeRecords(t, out, "peak_callsite", pid) {
		sum += s.LiveBytes
		if !s.Sampled || s.SampleBytes != 512<<10 || s.Comm != "mt-hostphases" || !slices.Contains([]string{"take_and_free", "hold_a", "hold_b", "keep"}, s.Function) {
			t.Errorf("peak_callsite %+v: want sampled, comm mt-hostphases, a phase's function", s)
		}
	}
	// Each figure is rounded apart: the sum is within a byte per site.
	if sum+4 < pk.LiveBytes || sum > pk.LiveBytes+4 {
		t.Errorf("peak sites hold %d, the peak record %d", sum, pk.LiveBytes)
	}
	if n := len(hostTimeRecords(t, out, "mark", pid)); n != 2*len(phaseMarks) {
		t.Errorf("%d mark records, want %d", n, 2*len(phaseMarks))
	}
	t.Logf("sampled peak: %+v", pk)
}
