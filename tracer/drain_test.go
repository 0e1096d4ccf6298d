package tracer

import "testing"

// TestSpread: a batch's events get times between the moment the ring was
// last seen empty and the moment the batch is read, in proportion to the
// bytes read up to them.
func TestSpread(t *testing.T) {
	for _, c := range []struct {
		name                     string
		from, stamp, read, total uint64
		want                     uint64
	}{
		{"first of four records", 1000, 2000, 80, 320, 1250},
		{"second", 1000, 2000, 160, 320, 1500},
		{"last ends at the stamp", 1000, 2000, 320, 320, 2000},
		{"came while the batch was read", 1000, 2000, 400, 320, 2000},
		{"no time passed", 2000, 2000, 80, 320, 2000},
		{"clock read before the last empty ring", 2500, 2000, 80, 320, 2000},
		{"empty batch", 1000, 2000, 0, 0, 2000},
		{"long span, no overflow", 0, 1 << 62, 1 << 31, 1 << 32, 1 << 61},
	} {
		if got := spread(c.from, c.stamp, c.read, c.total); got != c.want {
			t.Errorf("%s: spread(%d, %d, %d, %d) = %d, want %d", c.name, c.from, c.stamp, c.read, c.total, got, c.want)
		}
	}
}

// TestRecordBytes: a record's room in the ring, header included, as the
// kernel rounds it.
func TestRecordBytes(t *testing.T) {
	for n, want := range map[int]uint64{72: 80, 73: 88, 80: 88, 328: 336, 0: 8} {
		if got := recordBytes(n); got != want {
			t.Errorf("recordBytes(%d) = %d, want %d", n, got, want)
		}
	}
}
