package pipeline

import (
	"os"
	"strconv"

	"github.com/memtrace/memtrace/aggregate"
	"github.com/memtrace/memtrace/leakcheck"
	"github.com/memtrace/memtrace/recording"
)

// CheckedProcess is what a process's leak check found: its blocks, each
// with its class, and what the scan covered.
type CheckedProcess struct {
	Blocks                     []recording.LeakBlock
	Roots                      int
	ScannedBytes, SkippedBytes uint64
}

// CheckBlocks runs the leak check of process pid, stopped (every thread
// whose registers are given): which of blocks, its live blocks, its
// memory still reaches. The blocks are sorted by address first: the order
// the recording keeps, so that a replay judges them in the same order.
// unknownHeap: blocks allocated before the trace are unknown, so the heap
// outside the known blocks counts as roots. mapped: the process's own
// anonymous mappings, sorted (leakcheck.RootOptions.Mapped).
func CheckBlocks(pid int, blocks []recording.LeakBlock, threads []leakcheck.Thread, regs []uint64, unknownHeap bool,
	mapped []leakcheck.Range, h leakcheck.Heuristics) (CheckedProcess, error) {
	recording.SortLeakBlocks(blocks)
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		return CheckedProcess{}, err
	}
	maps, err := leakcheck.ParseMaps(f)
	f.Close()
	if err != nil {
		return CheckedProcess{}, err
	}
	in := make([]leakcheck.Block, len(blocks))
	for i, b := range blocks {
		in[i] = leakcheck.Block{Addr: b.Addr, Size: b.Size}
	}
	roots := leakcheck.Roots(maps, leakcheck.RootOptions{Threads: threads, UnknownHeap: unknownHeap, Blocks: in, Mapped: mapped})
	mem := leakcheck.OpenProcessMemory(pid)
	defer mem.Close()
	res, err := leakcheck.Check(leakcheck.Input{
		Blocks: in, Mem: mem, Roots: roots, Registers: regs,
		Heuristics: h, Maps: maps,
		IgnoreInterior: leakcheck.GlibcChunkHeader,
	})
	if err != nil {
		return CheckedProcess{}, err
	}
	for i := range blocks {
		blocks[i].Class, blocks[i].Heuristic, blocks[i].Indirect = res.Class[i], res.Heuristic[i], res.IndirectBytes[i]
	}
	return CheckedProcess{Blocks: blocks, Roots: len(roots), ScannedBytes: res.ScannedBytes, SkippedBytes: res.SkippedBytes}, nil
}

// LiveBlocks are the blocks a check of pid covers: its live blocks in t,
// and those it inherited from its parent (-f; inherited may be nil).
func LiveBlocks(t *aggregate.Table, inherited *leakcheck.Inherited, pid int) []recording.LeakBlock {
	var blocks []recording.LeakBlock
	t.ForEachLiveSite(uint32(pid), func(addr, size uint64, site aggregate.SiteKey) bool {
		blocks = append(blocks, recording.LeakBlock{Addr: addr, Size: size, Site: site})
		return true
	})
	if inherited != nil {
		for addr, h := range inherited.Of(pid) {
			blocks = append(blocks, recording.LeakBlock{Addr: addr, Size: h.Size, Site: h.Site})
		}
	}
	return blocks
}

// Mapped are pid's own anonymous mappings in t, sorted.
func Mapped(t *aggregate.Table, pid int) []leakcheck.Range {
	var out []leakcheck.Range
	t.ForEachMapped(uint32(pid), func(start, end uint64) { out = append(out, leakcheck.Range{Start: start, End: end}) })
	return out
}

// RecordedLeakCheck is a check's result as the recording keeps it, for a
// replay to judge again.
func RecordedLeakCheck(r *leakcheck.Verdict, blocks []recording.LeakBlock, now uint64) *recording.LeakCheck {
	c := recording.LeakCheck{PID: uint32(r.PID), Time: now, Comm: r.Comm, When: r.When, Cwd: r.Cwd,
		ScannedBytes: r.ScannedBytes, Blocks: blocks}
	if r.Err != nil {
		c.Err = r.Err.Error()
	}
	return &c
}
