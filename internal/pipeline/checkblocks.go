package pipeline

import (
	"math"
	"os"
	"runtime"
	"strconv"
	"sync"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/leakcheck"
	"github.com/memtrace/memtrace/internal/procfs"
	"github.com/memtrace/memtrace/internal/recording"
)

// CheckedProcess is what a process's leak check found: its blocks, each
// with its class, and what the scan covered.
type CheckedProcess struct {
	Live
	Result                     *leakcheck.Result
	Roots                      int
	ScannedBytes, SkippedBytes uint64
	// UntouchedBytes: roots' pages never touched, not read (leakcheck.Touched).
	UntouchedBytes uint64
}

// Each yields the checked blocks by address, each with its call site and
// class. The block it points to is reused: copy it to keep it.
func (c *CheckedProcess) Each(yield func(*recording.LeakBlock) bool) {
	sites := c.siteIndices()
	var b recording.LeakBlock
	for i, blk := range c.Blocks {
		b = recording.LeakBlock{Addr: blk.Addr, Size: blk.Size, Site: c.site(sites[i], blk.Addr),
			Class: c.Result.Class[i], Heuristic: c.Result.Heuristic[i], Indirect: c.Result.IndirectBytes[i]}
		if !yield(&b) {
			return
		}
	}
}

// CheckBlocks runs the leak check of process pid, stopped (every thread
// whose registers are given): which of its live blocks its memory still
// reaches. unknownHeap: blocks allocated before the trace are unknown, so
// the heap outside the known blocks counts as roots. mapped: the
// process's own anonymous mappings, sorted (leakcheck.RootOptions.Mapped).
func CheckBlocks(pid int, live Live, threads []leakcheck.Thread, regs []uint64, unknownHeap bool,
	mapped []leakcheck.Range, h leakcheck.Heuristics) (CheckedProcess, error) {
	f, err := os.Open("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		return CheckedProcess{}, err
	}
	maps, err := leakcheck.ParseMaps(f)
	f.Close()
	if err != nil {
		return CheckedProcess{}, err
	}
	roots := leakcheck.Roots(maps, leakcheck.RootOptions{Threads: threads, UnknownHeap: unknownHeap, Blocks: live.Blocks, Mapped: mapped})
	var untouched uint64
	if pm, err := procfs.OpenPagemap(pid); err == nil {
		// Pages never touched hold no pointer: not read (without the
		// page map, every root is read whole).
		roots, untouched = leakcheck.Touched(roots, maps, pm)
		pm.Close()
	}
	mem := leakcheck.OpenProcessMemory(pid)
	defer mem.Close()
	res, err := leakcheck.Check(leakcheck.Input{
		Blocks: live.Blocks, Mem: mem, Roots: roots, Registers: regs,
		Heuristics: h, Maps: maps,
		IgnoreInterior: leakcheck.GlibcChunkHeader,
		Whole:          live.whole(),
	})
	if err != nil {
		return CheckedProcess{}, err
	}
	return CheckedProcess{Live: live, Result: res, Roots: len(roots), ScannedBytes: res.ScannedBytes, SkippedBytes: res.SkippedBytes,
		UntouchedBytes: untouched}, nil
}

// Live is what a leak check of a process covers: its blocks, sorted by
// address (the order the recording keeps, so that a replay judges them
// in the same order), and where each was allocated. The blocks hold no
// site: 16 bytes a block, not 48, for the biggest heaps.
type Live struct {
	Blocks []leakcheck.Block
	table  *aggregate.Table
	pid    uint32
	inh    map[uint64]leakcheck.InheritedBlock
}

// LiveBlocks are the blocks a check of pid covers: its live blocks in t,
// and those it inherited from its parent (-f; inherited may be nil).
func LiveBlocks(t *aggregate.Table, inherited *leakcheck.Inherited, pid int) Live {
	var inh map[uint64]leakcheck.InheritedBlock
	if inherited != nil {
		inh = inherited.Of(pid)
	}
	blocks := make([]leakcheck.Block, 0, t.LiveCount(uint32(pid))+len(inh))
	t.ForEachLive(uint32(pid), func(addr, size, _ uint64) bool {
		blocks = append(blocks, leakcheck.Block{Addr: addr, Size: size})
		return true
	})
	for addr, h := range inh {
		blocks = append(blocks, leakcheck.Block{Addr: addr, Size: h.Size})
	}
	leakcheck.SortByAddr(blocks)
	return Live{Blocks: blocks, table: t, pid: uint32(pid), inh: inh}
}

// inheritedSite marks a block that is not in the table (an inherited one).
const inheritedSite = math.MaxUint32

// siteIndices looks up the table's site index of every block, on several
// cores (the table is not changed meanwhile): millions of look-ups at
// random places of a big table took 0.7 s on one.
func (l *Live) siteIndices() []uint32 {
	out := make([]uint32, len(l.Blocks))
	workers := max(1, min(runtime.GOMAXPROCS(0), len(l.Blocks)/(1<<14)))
	var wg sync.WaitGroup
	for w := range workers {
		lo, hi := w*len(out)/workers, (w+1)*len(out)/workers
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := lo; i < hi; i++ {
				s, ok := l.table.LiveSiteIndex(l.pid, l.Blocks[i].Addr)
				if !ok {
					s = inheritedSite
				}
				out[i] = s
			}
		}()
	}
	wg.Wait()
	return out
}

// site is the call site of the block at addr, of site index i.
func (l *Live) site(i uint32, addr uint64) aggregate.SiteKey {
	if i == inheritedSite {
		return l.inh[addr].Site
	}
	return l.table.SiteKeyAt(l.pid, i)
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

// whole is leakcheck.Input.Whole for the blocks: pymalloc's pools, where
// the process has some (aggregate.Table.PythonPools).
func (l Live) whole() func(leakcheck.Block) bool {
	if l.table == nil {
		return nil
	}
	pools := l.table.PythonPools(l.pid)
	if len(pools) == 0 {
		return nil
	}
	return func(b leakcheck.Block) bool { return pools[b.Addr] }
}
