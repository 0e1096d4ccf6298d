package pipeline

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/pprof/profile"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/folded"
	"github.com/memtrace/memtrace/internal/pprofout"
)

// TestExportExited: in whole-host mode the end's --folded and --pprof
// files hold the live processes and, folded by comm, those that exited
// (their allocations only); without an Exited (other modes, --listen)
// the live ones alone.
func TestExportExited(t *testing.T) {
	exited := func(pid uint32, allocs uint64) aggregate.ProcessSnapshot {
		return aggregate.ProcessSnapshot{PID: pid, Comm: "cc", Sites: []aggregate.SiteSnapshot{
			{Address: 0x401001, StackID: -1, Stats: aggregate.Stats{Allocs: allocs, AllocBytes: 10 * allocs, LiveAllocs: 1, LiveBytes: 10}},
			{Address: 0x402001, StackID: -1, Category: aggregate.Mapped, Stats: aggregate.Stats{Allocs: 1, AllocBytes: 4096}},
		}}
	}
	live := aggregate.Snapshot{Processes: []aggregate.ProcessSnapshot{{PID: 3, Comm: "make", Sites: []aggregate.SiteSnapshot{
		{Address: 0x501001, StackID: -1, Stats: aggregate.Stats{Allocs: 2, AllocBytes: 64, LiveAllocs: 1, LiveBytes: 32}},
	}}}}
	for _, tc := range []struct {
		name      string
		host      bool
		value     folded.Value
		want      string
		wantProcs int64
	}{
		{"whole host, allocated", true, folded.Allocated, "cc (exited);0x401000 50\nmake (3);0x501000 64\n", 2},
		{"whole host, live", true, folded.Live, "make (3);0x501000 32\n", 2},
		{"no exited", false, folded.Allocated, "0x501000 64\n", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			e := &Exports{}
			if tc.host {
				e.Exited = pprofout.NewExited(MaxExitedStacks)
			}
			e.ExitedProcs([]aggregate.ProcessSnapshot{exited(10, 2)})
			e.ExitedProcs([]aggregate.ProcessSnapshot{exited(11, 3)})
			c := &ExportFiles{PprofFile: filepath.Join(dir, "p.pb.gz"), FoldedFile: filepath.Join(dir, "f.folded"), FoldedValue: tc.value}
			now := time.Now()
			if err := WriteExportFiles(c, nil, live, pprofout.Sources{}, ExportEnd{Start: now, Time: now, Exited: e.Exited}); err != nil {
				t.Fatal(err)
			}
			b, err := os.ReadFile(c.FoldedFile)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != tc.want {
				t.Errorf("folded:\n%s\nwant:\n%s", b, tc.want)
			}
			f, err := os.Open(c.PprofFile)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			p, err := profile.Parse(f)
			if err != nil {
				t.Fatal(err)
			}
			var procs int64
			for _, sm := range p.Sample {
				if n := sm.NumLabel[pprofout.ExitedCount]; len(n) > 0 {
					procs = n[0]
					if sm.Value[pprofout.InuseSpace] != 0 || sm.Value[pprofout.AllocSpace] != 50 {
						t.Errorf("exited sample values %v, want 5 allocs of 50 bytes, none in use", sm.Value)
					}
				}
			}
			if procs != tc.wantProcs {
				t.Errorf("exited processes %d, want %d", procs, tc.wantProcs)
			}
		})
	}
}
