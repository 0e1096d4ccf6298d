package report

import (
	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/symbolize"
)

// fakeSymbolizer resolves from a fixed table keyed by address; addresses
// not in it resolve to nothing, as for an address in no known mapping.
type fakeSymbolizer map[uint64]symbolize.Frame

func (f fakeSymbolizer) Resolve(pid int, ret uint64) symbolize.Frame {
	fr, ok := f[ret]
	if !ok {
		return symbolize.Frame{Address: ret}
	}
	fr.Address = ret
	return fr
}

const (
	KiB = 1024
	MiB = 1024 * KiB
)

// Addresses of the fixture's call sites.
const (
	addrMakeBuffer = 0x401a2b
	addrParse      = 0x401f00
	addrLibfoo     = 0x7f3a00001234
	addrArena      = 0x402200
	addrNowhere    = 0xdeadbeef
)

var fixtureSymbols = fakeSymbolizer{
	addrMakeBuffer: {Function: "make_buffer(unsigned long)", File: "src/buf.c", Line: 42, Module: "/usr/bin/myserver", Offset: 0x1a2b},
	addrParse:      {Function: "parse_request", File: "src/http.c", Line: 310, Module: "/usr/bin/myserver", Offset: 0x1f00},
	addrLibfoo:     {Module: "/usr/lib/x86_64-linux-gnu/libfoo.so.1", Offset: 0x1234},
	addrArena:      {Function: "arena_grow", File: "src/arena.c", Line: 88, Module: "/usr/bin/myserver", Offset: 0x2200},
}

// twoSiteProcess is a running process with one leaking and one churning
// heap call site; it is the example in the package's report and golden file.
func twoSiteProcess() aggregate.ProcessSnapshot {
	return aggregate.ProcessSnapshot{
		PID:  4242,
		Comm: "myserver",
		Heap: aggregate.Stats{
			Allocs: 1020, AllocBytes: 2*MiB + 512*KiB,
			Frees: 1010, FreedBytes: 1*MiB + 512*KiB,
			LiveAllocs: 10, LiveBytes: 1 * MiB,
		},
		PeakLiveBytes:  1*MiB + 256*KiB,
		UnmatchedFrees: 0,
		Sites: []aggregate.SiteSnapshot{
			{Address: addrParse, Category: aggregate.Heap, Stats: aggregate.Stats{
				Allocs: 1000, AllocBytes: 512 * KiB, Frees: 1000, FreedBytes: 512 * KiB}},
			{Address: addrMakeBuffer, Category: aggregate.Heap, Stats: aggregate.Stats{
				Allocs: 20, AllocBytes: 2 * MiB, Frees: 10, FreedBytes: 1 * MiB,
				LiveAllocs: 10, LiveBytes: 1 * MiB}},
		},
	}
}

// busyProcess has heap and mmap sites, an unresolved site in a library,
// one in no mapping at all, unmatched frees and lost events, and it exited.
func busyProcess() aggregate.ProcessSnapshot {
	return aggregate.ProcessSnapshot{
		PID:      77,
		Comm:     "worker",
		Exited:   true,
		ExitTime: 9_000_000_000,
		Heap: aggregate.Stats{
			Allocs: 40, AllocBytes: 3 * MiB, Frees: 28, FreedBytes: 1 * MiB,
			LiveAllocs: 12, LiveBytes: 2 * MiB,
		},
		PeakLiveBytes:  2*MiB + 100*KiB,
		UnmatchedFrees: 3,
		LostEvents:     5,
		Mapped: aggregate.Stats{
			Allocs: 4, AllocBytes: 8 * MiB, Frees: 2, FreedBytes: 4 * MiB,
			LiveAllocs: 2, LiveBytes: 4 * MiB,
		},
		PeakMappedLiveBytes: 6 * MiB,
		Sites: []aggregate.SiteSnapshot{
			{Address: addrNowhere, Category: aggregate.Heap, Stats: aggregate.Stats{
				Allocs: 1, AllocBytes: 1023, LiveAllocs: 1, LiveBytes: 1023}},
			{Address: addrLibfoo, Category: aggregate.Heap, Stats: aggregate.Stats{
				Allocs: 30, AllocBytes: 2 * MiB, Frees: 20, FreedBytes: 1 * MiB,
				LiveAllocs: 10, LiveBytes: 1*MiB + 512*KiB}},
			{Address: addrArena, Category: aggregate.Mapped, Stats: aggregate.Stats{
				Allocs: 4, AllocBytes: 8 * MiB, Frees: 2, FreedBytes: 4 * MiB,
				LiveAllocs: 2, LiveBytes: 4 * MiB}},
			{Address: addrMakeBuffer, Category: aggregate.Heap, Stats: aggregate.Stats{
				Allocs: 9, AllocBytes: 1*MiB - 1023, Frees: 8, FreedBytes: 512 * KiB,
				LiveAllocs: 1, LiveBytes: 512*KiB - 1023}},
		},
	}
}

// periodicSnapshot is a mid-run snapshot of both fixture processes.
func periodicSnapshot() aggregate.Snapshot {
	return aggregate.Snapshot{
		Time:       5_123_456_789_012,
		Processes:  []aggregate.ProcessSnapshot{twoSiteProcess(), busyProcess()},
		LostEvents: 5,
	}
}
