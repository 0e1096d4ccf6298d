package leakcheck

import (
	"encoding/binary"
	"sort"
)

// fakeMemory is an address space made of regions.
type fakeMemory struct {
	regions []fakeRegion // sorted, not overlapping
	reads   int
}

type fakeRegion struct {
	addr uint64
	data []byte
}

// region adds (or returns) the region at addr of n bytes.
func (m *fakeMemory) region(addr uint64, n int) []byte {
	for _, r := range m.regions {
		if r.addr == addr && len(r.data) == n {
			return r.data
		}
	}
	r := fakeRegion{addr, make([]byte, n)}
	m.regions = append(m.regions, r)
	sort.Slice(m.regions, func(i, j int) bool { return m.regions[i].addr < m.regions[j].addr })
	return r.data
}

func (m *fakeMemory) put(addr, v uint64) {
	for _, r := range m.regions {
		if addr >= r.addr && addr+8 <= r.addr+uint64(len(r.data)) {
			binary.LittleEndian.PutUint64(r.data[addr-r.addr:], v)
			return
		}
	}
	panic("put outside memory")
}

func (m *fakeMemory) ReadAt(p []byte, addr uint64) (int, error) {
	m.reads++
	done := 0
	for done < len(p) {
		a := addr + uint64(done)
		i := sort.Search(len(m.regions), func(i int) bool {
			r := m.regions[i]
			return r.addr+uint64(len(r.data)) > a
		})
		if i == len(m.regions) || m.regions[i].addr > a {
			return done, nil
		}
		r := m.regions[i]
		done += copy(p[done:], r.data[a-r.addr:])
	}
	return done, nil
}

// batchFake counts batch reads.
type batchFake struct {
	*fakeMemory
	batches int
	bytes   int
}

func (b *batchFake) ReadBatch(bufs [][]byte, addrs []uint64, n []int) {
	b.batches++
	for i := range bufs {
		n[i], _ = b.fakeMemory.ReadAt(bufs[i], addrs[i])
		b.bytes += len(bufs[i])
	}
}

// forkFake is a batchFake whose forks read the same regions with counters
// of their own, so that readers in other goroutines do not share state.
type forkFake struct {
	*batchFake
	forks int
}

func (f *forkFake) Fork() Memory {
	f.forks++
	return &batchFake{fakeMemory: &fakeMemory{regions: f.regions}}
}
