package recording

import (
	"bytes"
	"math/rand/v2"
	"testing"

	"github.com/memtrace/memtrace/aggregate"
)

// TestMutated reads 300 damaged copies of a recording (bytes overwritten,
// files cut short): each read ends with records or an error, never a panic
// or a hang. FuzzReader explores further with go test -fuzz.
func TestMutated(t *testing.T) {
	file, _ := record(t, 300)
	rng := rand.New(rand.NewPCG(9, 9))
	for i := range 300 {
		b := append([]byte(nil), file...)
		for range 1 + rng.IntN(4) {
			b[rng.IntN(len(b))] = byte(rng.IntN(256))
		}
		if i%3 == 0 {
			b = b[:rng.IntN(len(b))]
		}
		r, err := NewReader(bytes.NewReader(b))
		if err == nil {
			tb := aggregate.NewTable()
			var rec Record
			n := 0
			for ; n < 1e6; n++ {
				if r.Next(&rec) != nil {
					break
				}
				rec.ApplyTo(tb)
			}
			r.Close()
		}
	}
}
