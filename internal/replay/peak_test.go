package replay

import (
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/pipeline"
	"github.com/memtrace/memtrace/internal/recording"
)

// withHint copies the recording at path with a peak hint after it, as the
// writer's Close puts it (recording.Writer.SetPeak).
func withHint(t *testing.T, path string, p recording.Peak) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	w, err := recording.Create(filepath.Join(dir, "hint.rec"), recording.Info{})
	if err != nil {
		t.Fatal(err)
	}
	w.SetPeak(p)
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	h, err := os.ReadFile(filepath.Join(dir, "hint.rec"))
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(dir, "run.rec")
	if err := os.WriteFile(out, append(b, h[len(h)-36:]...), 0o644); err != nil {
		t.Fatal(err)
	}
	return out
}

// TestReplayAtPeakReadsOnce: with the live run's peak hint, --at peak
// reads the recording once and shows the moment the two reads find; with
// none (a killed run, an older recording), a hint that names no moment,
// or another --peak-tolerance, it reads the file twice.
func TestReplayAtPeakReadsOnce(t *testing.T) {
	plain := writeRun(t)
	at, _ := ParseAt("peak")
	// The run's one process took its 4th peak snapshot at 4 s (the
	// tolerance is 0: one per new peak).
	right := recording.Peak{PID: 9, Snapshots: 4, Time: 1000e9 + 4e9}
	// What the live run writes: its table's at the end (pipeline.PeakOf).
	end, err := replay(&ReplayConfig{File: plain}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := pipeline.PeakOf(end.table); !ok || p != right {
		t.Errorf("PeakOf = %+v, %v; want %+v", p, ok, right)
	}
	tests := []struct {
		name   string
		file   string
		tol    bool
		passes int
	}{
		{"hint", withHint(t, plain, right), false, 0},
		{"no hint", plain, false, 1},
		{"hint of no moment", withHint(t, plain, recording.Peak{PID: 9, Snapshots: 99, Time: 1}), false, 1},
		{"another tolerance", withHint(t, plain, right), true, 1},
	}
	for _, tc := range tests {
		before := peakPasses
		c := &ReplayConfig{File: tc.file, At: at, TolSet: tc.tol}
		if tc.tol {
			c.PeakTol = aggregate.PeakTolerance{Bytes: 1}
		}
		rp, err := replay(c, io.Discard)
		if err != nil || rp.missing != "" {
			t.Fatalf("%s: %v %s", tc.name, err, rp.missing)
		}
		p := rp.snap.Processes[0]
		if p.Heap.LiveBytes != 4000 || p.Heap.AllocBytes != 4000 || rp.snap.Time != right.Time {
			t.Errorf("%s: live %d allocated %d at %d; want 4000, 4000 at %d", tc.name, p.Heap.LiveBytes, p.Heap.AllocBytes,
				rp.snap.Time, right.Time)
		}
		if n := peakPasses - before; n != tc.passes {
			t.Errorf("%s: %d reads to find the peak, want %d", tc.name, n, tc.passes)
		}
	}
}
