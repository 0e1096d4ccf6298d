package recording

import (
	"bytes"
	"encoding/binary"
	"errors"
	"io"
	"math/rand/v2"
	"reflect"
	"testing"

	"github.com/klauspost/compress/zstd"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/leakcheck"
)

// fixtureLeakCheck classifies pid's live blocks in t by a rule that gives
// every class, heuristics and indirect bytes.
func fixtureLeakCheck(t *aggregate.Table, pid uint32) LeakCheck {
	c := LeakCheck{PID: pid, Time: 7e9, Comm: "one", When: "at exit", Cwd: "/src", ScannedBytes: 123456}
	t.ForEachLiveSite(pid, func(addr, size uint64, site aggregate.SiteKey) bool {
		b := LeakBlock{Addr: addr, Size: size, Site: site, Class: leakcheck.Class(addr / 16 % 4)}
		switch b.Class {
		case leakcheck.Definite:
			b.Indirect = size * (addr % 3)
		case leakcheck.Reachable:
			b.Heuristic = leakcheck.Heuristic(1 << (addr / 64 % 5) >> 1) // none or one
		}
		c.Blocks = append(c.Blocks, b)
		return true
	})
	return c
}

// readLeakChecks returns the leak check records of a recording.
func readLeakChecks(t *testing.T, file []byte) ([]LeakCheck, error) {
	t.Helper()
	r, err := NewReader(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var out []LeakCheck
	var rec Record
	for {
		err := r.Next(&rec)
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		if rec.Kind == KindLeakCheck {
			c := rec.Leak
			c.Blocks = append([]LeakBlock(nil), c.Blocks...)
			out = append(out, c)
		}
	}
}

func TestLeakCheckRoundTrip(t *testing.T) {
	file, _, want := recordAll(t, 20000, aggregate.PeakTolerance{Bytes: 4096})
	got, err := readLeakChecks(t, file)
	if err != nil {
		t.Fatal(err)
	}
	classes := map[leakcheck.Class]int{}
	heur := 0
	for _, b := range want.Blocks {
		classes[b.Class]++
		if b.Heuristic != 0 {
			heur++
		}
	}
	if len(want.Blocks) < 100 || len(classes) != 4 || heur == 0 {
		t.Fatalf("fixture: %d blocks, classes %v, %d by heuristic", len(want.Blocks), classes, heur)
	}
	if len(got) != 1 || !reflect.DeepEqual(got[0], want) {
		t.Errorf("read %d leak checks; first differs from the one written", len(got))
	}
}

// A check of more blocks than the reader takes in at a time, an error-only
// check, and one with no blocks.
func TestLeakCheckLarge(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Info{LeakCheck: true})
	if err != nil {
		t.Fatal(err)
	}
	big := LeakCheck{PID: 9, Time: 1, Comm: "big", When: "when the run ended"}
	for i := range 300000 {
		b := LeakBlock{Addr: 0x5555_0000_0000 + uint64(i)*48 + uint64(i%7)*8, Size: uint64(1 + i%40),
			Site: aggregate.SiteKey{Address: 0x401000 + uint64(i%97), StackID: int32(i%5) - 1}, Class: leakcheck.Class(i % 4)}
		if b.Class == leakcheck.Definite {
			b.Indirect = uint64(i) << 20
		}
		big.Blocks = append(big.Blocks, b)
	}
	want := []LeakCheck{
		big,
		{PID: 10, Time: 2, Comm: "gone", When: "when the run ended", Err: "no such process"},
		{PID: 11, Time: 3, Comm: "empty", When: "at exit"},
	}
	for i := range want {
		c := want[i]
		c.Blocks = append([]LeakBlock(nil), c.Blocks...)
		w.LeakCheck(&c)
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := readLeakChecks(t, buf.Bytes())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("read %d checks, want %d", len(got), len(want))
	}
	for i := range want {
		if !reflect.DeepEqual(got[i], want[i]) {
			t.Errorf("check %d (pid %d) differs after reading", i, want[i].PID)
		}
	}
	t.Logf("%d blocks in %d bytes", len(big.Blocks), buf.Len())
}

// A version-1 file (no leak records) reads as before.
func TestVersion1(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Info{Mode: "command"})
	if err != nil {
		t.Fatal(err)
	}
	tb := aggregate.NewTable()
	tb.SetObserver(w)
	feed(tb, 3000, aggregate.PeakTolerance{})
	w.Close()
	v1 := buf.Bytes()
	binary.LittleEndian.PutUint16(v1[len(Magic):], 1)
	snap, _, err := replay(v1)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(snap, tb.Snapshot()) {
		t.Errorf("version 1 file replays differently")
	}
	binary.LittleEndian.PutUint16(v1[len(Magic):], Version+1)
	if _, _, err := replay(v1); !errors.Is(err, ErrVersion) {
		t.Errorf("version %d: err = %v, want ErrVersion", Version+1, err)
	}
}

// A stack deeper than a record head of bytes reads whole.
func TestDeepStack(t *testing.T) {
	var buf bytes.Buffer
	w, err := NewWriter(&buf, Info{Detail: true})
	if err != nil {
		t.Fatal(err)
	}
	frames := make([]uint64, 120)
	for i := range frames {
		frames[i] = 1<<63 | uint64(i)<<40
	}
	w.SetStacks(func(int32) ([]uint64, error) { return frames, nil })
	tb := aggregate.NewTable()
	tb.SetObserver(w)
	// Enough stacks that some straddle the reader's chunks.
	for i := range 3000 {
		tb.Apply(&event.Event{PID: 1, Kind: event.Alloc, Func: event.FuncMalloc, Addr: uint64(0x1000 + 16*i), Size: 16,
			CallSite: 0x400100, StackID: int32(i)})
	}
	w.Close()
	r, err := NewReader(bytes.NewReader(buf.Bytes()))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var rec Record
	stacks := 0
	for {
		err := r.Next(&rec)
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if rec.Kind == KindStack {
			stacks++
			if !reflect.DeepEqual(rec.Frames, frames) {
				t.Fatalf("stack %d differs", rec.StackID)
			}
		}
	}
	if stacks != 3000 {
		t.Errorf("%d stacks read, want 3000", stacks)
	}
}

// TestLeakCheckMutated damages the decompressed bytes of a leak check
// record (overwritten, cut short) and reads the result: an error or
// records, never a panic, a hang or a class out of range.
func TestLeakCheckMutated(t *testing.T) {
	file, _, lc := recordAll(t, 3000, aggregate.PeakTolerance{})
	zr, err := zstd.NewReader(bytes.NewReader(file[headerLen:]))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(zr)
	zr.Close()
	if err != nil {
		t.Fatal(err)
	}
	// The leak check is the last record: its blocks take at least 4
	// bytes each.
	from := len(plain) - 4*len(lc.Blocks)
	if len(lc.Blocks) < 50 || from < 0 {
		t.Fatalf("fixture: %d blocks in %d bytes", len(lc.Blocks), len(plain))
	}
	zw, _ := zstd.NewWriter(nil)
	rng := rand.New(rand.NewPCG(5, 6))
	errs := 0
	for i := range 300 {
		b := append([]byte(nil), plain...)
		for range 1 + rng.IntN(4) {
			b[from+rng.IntN(len(b)-from)] = byte(rng.IntN(256))
		}
		if i%3 == 0 {
			b = b[:from+rng.IntN(len(b)-from)]
		}
		damaged := zw.EncodeAll(b, append([]byte(nil), file[:headerLen]...))
		checks, err := readLeakChecks(t, damaged)
		if err != nil {
			errs++
		}
		for _, c := range checks {
			for _, blk := range c.Blocks {
				if blk.Class > leakcheck.Definite || blk.Heuristic > leakcheck.AllHeuristics {
					t.Fatalf("damaged record %d read a block %+v", i, blk)
				}
			}
		}
	}
	if errs == 0 {
		t.Errorf("no damaged record gave an error")
	}
}
