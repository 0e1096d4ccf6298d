package recording

import (
	"bytes"
	"errors"
	"io"
	"math/rand/v2"
	"testing"

	"github.com/memtrace/memtrace/internal/aggregate"
)

// TestMutated reads 300 damaged copies of a recording (bytes overwritten,
// files cut short). Each read must end, and a copy cut short must end with
// an error that says so (ErrTruncated or ErrCorrupt), never with io.EOF as
// if the run were whole. FuzzReader explores further with go test -fuzz.
func TestMutated(t *testing.T) {
	file, _ := record(t, 300)
	whole := countRecords(t, file)
	// The copies are damaged from a whole recording: one event a record at least.
	if whole < 300 {
		t.Fatalf("the recording of 300 events reads as %d records", whole)
	}
	rng := rand.New(rand.NewPCG(9, 9))
	var damaged int
	for i := range 300 {
		b := append([]byte(nil), file...)
		for range 1 + rng.IntN(4) {
			b[rng.IntN(len(b))] = byte(rng.IntN(256))
		}
		cut := i%3 == 0
		if cut {
			b = b[:rng.IntN(len(b))]
		}
		r, err := NewReader(bytes.NewReader(b))
		if err != nil {
			damaged++
			continue
		}
		tb := aggregate.NewTable()
		var rec Record
		n := 0
		for ; n <= 10*whole; n++ {
			if err = r.Next(&rec); err != nil {
				break
			}
			applyTo(&rec, tb)
		}
		r.Close()
		if err == nil {
			t.Fatalf("copy %d: %d records from a recording of %d and no end", i, n, whole)
		}
		if err != io.EOF {
			damaged++
			if !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrCorrupt) {
				t.Errorf("copy %d: error %v is neither ErrTruncated nor ErrCorrupt", i, err)
			}
		} else if cut {
			t.Errorf("copy %d, cut to %d of %d bytes: read to io.EOF after %d records", i, len(b), len(file), n)
		}
	}
	// Overwritten bytes land in the zstd frame; nearly every copy must be
	// found damaged (a byte may be overwritten with its own value).
	if damaged < 250 {
		t.Errorf("only %d of 300 damaged copies were reported damaged", damaged)
	}
}

func countRecords(t *testing.T, file []byte) int {
	t.Helper()
	r, err := NewReader(bytes.NewReader(file))
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	var rec Record
	for n := 0; ; n++ {
		if err := r.Next(&rec); err == io.EOF {
			return n
		} else if err != nil {
			t.Fatalf("whole recording: %v", err)
		}
	}
}
