package report

import (
	"bytes"
	"errors"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/aggregate"
)

func snapshotOf(lost uint64, procs ...aggregate.ProcessSnapshot) aggregate.Snapshot {
	return aggregate.Snapshot{Time: 5_123_456_789_012, Processes: procs, LostEvents: lost}
}

func TestWriteTextContents(t *testing.T) {
	noSites := twoSiteProcess()
	noSites.Sites = nil
	lostOnly := twoSiteProcess()
	lostOnly.LostEvents = 2

	tests := []struct {
		name    string
		s       aggregate.Snapshot
		sym     Symbolizer
		o       Options
		want    []string // each must appear
		notWant []string // none may appear
	}{{
		name: "header figures of a running process",
		s:    snapshotOf(0, twoSiteProcess()),
		sym:  fixtureSymbols,
		o:    Options{Top: DefaultTop},
		want: []string{
			"=== memtrace report at t=5123.456s (monotonic clock) ===\n",
			"\npid 4242 myserver\n",
			"  live:        1.0 MiB in 10 blocks, peak live 1.3 MiB\n",
			"  allocated:   2.5 MiB in 1020 calls\n",
			"  freed:       1.5 MiB in 1010 blocks, unmatched frees: 0\n",
			"  lost events: 0\n",
			"heap call sites by live bytes (all 2):",
			"make_buffer(unsigned long)  src/buf.c:42    myserver",
		},
		notWant: []string{"WARNING", "(exited)", "anon mmap", "FINAL", "mmap call sites"},
	}, {
		name: "lost events warn at both ends and in the process",
		s:    periodicSnapshot(),
		sym:  fixtureSymbols,
		want: []string{
			"===\nWARNING: 5 events lost: figures are incomplete\n\n",
			"\n\nWARNING: 5 events lost: figures are incomplete\n",
			"  lost events: 5 (this process's figures are incomplete)\n",
			"  lost events: 0\n",
		},
	}, {
		name: "lost events of one process warn even if the run total is missing",
		s:    snapshotOf(0, lostOnly),
		sym:  fixtureSymbols,
		want: []string{"WARNING: 2 events lost: figures are incomplete", "lost events: 2"},
	}, {
		name: "exited process with mmap, unmatched frees and unresolved sites",
		s:    snapshotOf(5, busyProcess()),
		sym:  fixtureSymbols,
		want: []string{
			"pid 77 worker (exited)\n",
			"  freed:       1.0 MiB in 28 blocks, unmatched frees: 3 (",
			"  anon mmap:   4.0 MiB live in 2 regions, peak 6.0 MiB; 8.0 MiB mapped by 4 calls; 4.0 MiB unmapped by 2 calls\n",
			"[unknown] libfoo.so.1+0x1234  -             libfoo.so.1",
			"[unknown] 0xdeadbeef          -             [unknown]",
			"anonymous mmap call sites by live bytes (all 1):",
			"LIVE  REGIONS   MAPPED  MMAPS  UNMAPPED  FUNCTION",
			"arena_grow  src/arena.c:88  myserver",
		},
	}, {
		name:    "final report",
		s:       snapshotOf(0, twoSiteProcess()),
		sym:     fixtureSymbols,
		o:       Options{Final: true},
		want:    []string{"=== memtrace FINAL report at t=5123.456s (monotonic clock) ===\n"},
		notWant: []string{"memtrace report at"},
	}, {
		name:    "top cuts and says so",
		s:       snapshotOf(0, twoSiteProcess()),
		sym:     fixtureSymbols,
		o:       Options{Top: 1},
		want:    []string{"heap call sites by live bytes (top 1 of 2):", "make_buffer"},
		notWant: []string{"parse_request"},
	}, {
		name: "raw bytes",
		s:    snapshotOf(0, twoSiteProcess()),
		sym:  fixtureSymbols,
		o:    Options{Raw: true},
		want: []string{
			"  live:        1048576 B in 10 blocks, peak live 1310720 B\n",
			"   1048576      10    2097152     20  1048576  make_buffer",
		},
		notWant: []string{"MiB", "KiB"},
	}, {
		name: "singular counts",
		s: snapshotOf(0, aggregate.ProcessSnapshot{PID: 1, Comm: "one",
			Heap: aggregate.Stats{Allocs: 1, AllocBytes: 8, Frees: 1, FreedBytes: 8, LiveAllocs: 1, LiveBytes: 8}}),
		want: []string{"8 B in 1 block,", "8 B in 1 call\n", "8 B in 1 block, unmatched"},
	}, {
		name: "process without call sites",
		s:    snapshotOf(0, noSites),
		want: []string{"  lost events: 0\n  no call sites recorded\n"},
	}, {
		name: "no processes",
		s:    aggregate.Snapshot{Time: 1_000_000_000},
		want: []string{"=== memtrace report at t=1.000s (monotonic clock) ===\nno allocations traced\n"},
	}, {
		name:    "no symbolizer",
		s:       snapshotOf(0, twoSiteProcess()),
		want:    []string{"[unknown] 0x401a2b", "[unknown] 0x401f00"},
		notWant: []string{"make_buffer"},
	}, {
		name: "no comm",
		s:    snapshotOf(0, aggregate.ProcessSnapshot{PID: 9}),
		want: []string{"\npid 9\n"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteText(&b, tt.s, tt.sym, tt.o); err != nil {
				t.Fatalf("WriteText: %v", err)
			}
			out := b.String()
			for _, w := range tt.want {
				if !strings.Contains(out, w) {
					t.Errorf("output lacks %q; output:\n%s", w, out)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(out, w) {
					t.Errorf("output has %q; output:\n%s", w, out)
				}
			}
		})
	}
}

func TestWriteTextSortOrder(t *testing.T) {
	tests := []struct {
		sort        SortKey
		first, then string
	}{
		{SortLive, "make_buffer", "parse_request"},
		{SortAllocated, "make_buffer", "parse_request"},
		{SortAllocs, "parse_request", "make_buffer"},
	}
	for _, tt := range tests {
		var b bytes.Buffer
		if err := WriteText(&b, snapshotOf(0, twoSiteProcess()), fixtureSymbols, Options{Sort: tt.sort}); err != nil {
			t.Fatalf("WriteText: %v", err)
		}
		out := b.String()
		i, j := strings.Index(out, tt.first), strings.Index(out, tt.then)
		if i < 0 || j < 0 || i > j {
			t.Errorf("sort %s: want %s before %s; output:\n%s", tt.sort, tt.first, tt.then, out)
		}
	}
}

// countingWriter counts Write calls and can fail them.
type countingWriter struct {
	writes int
	err    error
}

func (c *countingWriter) Write(p []byte) (int, error) {
	c.writes++
	if c.err != nil {
		return 0, c.err
	}
	return len(p), nil
}

func TestWritersWriteOnceAndWrapErrors(t *testing.T) {
	writers := []struct {
		name  string
		write func(*countingWriter, Options) error
	}{
		{"text", func(w *countingWriter, o Options) error { return WriteText(w, periodicSnapshot(), fixtureSymbols, o) }},
		{"json", func(w *countingWriter, o Options) error { return WriteJSON(w, periodicSnapshot(), fixtureSymbols, o) }},
	}
	for _, wr := range writers {
		var ok countingWriter
		if err := wr.write(&ok, Options{}); err != nil {
			t.Errorf("%s: %v", wr.name, err)
		}
		if ok.writes != 1 {
			t.Errorf("%s: %d writes, want the whole report in 1", wr.name, ok.writes)
		}

		broken := errors.New("broken pipe")
		failing := countingWriter{err: broken}
		if err := wr.write(&failing, Options{}); !errors.Is(err, broken) {
			t.Errorf("%s: error %v does not wrap the writer's", wr.name, err)
		}

		var unused countingWriter
		for _, o := range []Options{{Top: -1}, {Sort: "size"}} {
			if err := wr.write(&unused, o); err == nil {
				t.Errorf("%s: options %+v accepted", wr.name, o)
			}
		}
		if unused.writes != 0 {
			t.Errorf("%s: invalid options still wrote output", wr.name)
		}
	}
}
