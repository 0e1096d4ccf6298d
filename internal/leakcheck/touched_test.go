package leakcheck

import (
	"encoding/binary"
	"errors"
	"slices"
	"testing"
)

// fakePageMap is a page map: the pages present, swapped, or unreadable
// from page failFrom on.
type fakePageMap struct {
	present, swapped map[uint64]bool
	failFrom         uint64
}

func (f fakePageMap) ReadAt(buf []byte, first uint64) (int, error) {
	n := uint64(len(buf) / 8)
	if f.failFrom != 0 && first+n > f.failFrom {
		n = max(f.failFrom, first) - first
	}
	for i := range n {
		var e uint64
		if f.present[first+i] {
			e |= pagePresent
		}
		if f.swapped[first+i] {
			e |= pageSwapped
		}
		binary.LittleEndian.PutUint64(buf[i*8:], e)
	}
	if n < uint64(len(buf)/8) {
		return int(n), errors.New("short read")
	}
	return int(n), nil
}

// TestTouched: a root is narrowed to its pages present or in swap, in
// private mappings only; short roots, shared mappings and pages whose
// entries cannot be read are scanned whole.
func TestTouched(t *testing.T) {
	const page = pageSize
	private := Mapping{Start: 0x100000, End: 0x100000 + 8192*page, Perms: "rw-p"}
	shared := Mapping{Start: 0x4000000, End: 0x4000000 + 64*page, Perms: "rw-s", Path: "/dev/shm/x", Inode: 7}
	ms := []Mapping{private, shared}
	pg := func(addr uint64) uint64 { return addr / page }
	base := private.Start
	pm := fakePageMap{
		present: map[uint64]bool{pg(base): true, pg(base) + 1: true, pg(base) + 40: true, pg(base) + 5000: true},
		swapped: map[uint64]bool{pg(base) + 41: true},
	}
	tests := []struct {
		name      string
		roots     []Range
		pm        fakePageMap
		want      []Range
		untouched uint64
	}{
		{"short: whole", []Range{{base + 3*page, base + 4*page}}, pm, []Range{{base + 3*page, base + 4*page}}, 0},
		{"present and swapped runs, across chunks", []Range{{base, base + 8192*page}}, pm,
			[]Range{{base, base + 2*page}, {base + 40*page, base + 42*page}, {base + 5000*page, base + 5001*page}},
			(8192 - 5) * page},
		{"unaligned ends: cut to the root", []Range{{base + 100, base + 41*page + 8}}, pm,
			[]Range{{base + 100, base + 2*page}, {base + 40*page, base + 41*page + 8}},
			41*page + 8 - 100 - (2*page - 100) - (page + 8)},
		{"nothing touched", []Range{{base + 100*page, base + 200*page}}, pm, nil, 100 * page},
		{"shared: whole", []Range{{shared.Start, shared.End}}, pm, []Range{{shared.Start, shared.End}}, 0},
		{"in no mapping: whole", []Range{{0x9000000, 0x9000000 + 64*page}}, pm, []Range{{0x9000000, 0x9000000 + 64*page}}, 0},
		{"entries unreadable from page 42 on: scanned", []Range{{base, base + 64*page}},
			fakePageMap{present: pm.present, swapped: pm.swapped, failFrom: pg(base) + 42},
			[]Range{{base, base + 2*page}, {base + 40*page, base + 64*page}}, 38 * page},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, untouched := Touched(tt.roots, ms, tt.pm)
			if !slices.Equal(got, tt.want) || untouched != tt.untouched {
				t.Errorf("Touched = %x, %d untouched; want %x, %d", got, untouched, tt.want, tt.untouched)
			}
		})
	}
}
