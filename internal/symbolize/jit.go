package symbolize

import (
	"cmp"
	"container/heap"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/memtrace/memtrace/internal/procfile"
	"github.com/memtrace/memtrace/internal/procfs"
)

// Limits on what a process's JIT maps may make memtrace hold: a file
// larger than maxJITFile is not read at all; past maxJITSymbols symbols a
// process's newer ones are dropped.
const (
	maxJITFile    = 1 << 30
	maxJITSymbols = 1 << 21
	jitReadChunk  = 4 << 20
	// jitRefreshEvery throttles the re-reads a miss triggers: a report
	// resolving thousands of JIT addresses checks the files' sizes at most
	// this often. A capture always re-reads.
	jitRefreshEvery = 100 * time.Millisecond
)

// jitTable is a process's JIT symbols: an address is named by the newest
// symbol (the last read) that covers it, as code freed by a runtime's
// collector is reused for other code. The symbols are flattened into
// segments that do not overlap, each naming its addresses, so that a
// lookup is one binary search whatever the map holds (it is untrusted: a
// symbol covering everything must not make every lookup scan them all).
//
// A runtime adds a few lines at a time while flattening all of them takes
// ~1 µs per symbol, so the symbols read since the last full flattening
// (at most jitRecent) have segments of their own, looked up first: they
// are all newer than the rest.
type jitTable struct {
	syms    []jitEntry     // in reading order: a later one is newer
	segs    []jitSeg       // syms[:base], sorted by start, not overlapping
	recent  []jitSeg       // syms[base:], likewise
	base    int            // how many symbols segs covers
	byStart map[uint64]int // the newest symbol starting at an address
}

// jitRecent bounds the symbols looked up apart before all are flattened
// together again.
const jitRecent = 4096

type jitEntry struct {
	start, end uint64
	name       string
	file       string // the map or dump that named it, as the process sees it
}

// jitSeg is a range of addresses named by syms[sym].
type jitSeg struct {
	start, end uint64
	sym        int
}

// add adds syms, read from file after every symbol already there. It
// reports how many it dropped for the size bound.
func (t *jitTable) add(syms []JITSymbol, file string) (dropped int) {
	if len(syms) == 0 {
		return 0
	}
	if t.byStart == nil {
		t.byStart = map[uint64]int{}
	}
	added := false
	for _, s := range syms {
		e := jitEntry{start: s.Start, end: s.Start + s.Size, name: s.Name, file: file}
		if i, ok := t.byStart[e.start]; ok && t.syms[i] == e {
			// Said again (a map written anew at each request, as the
			// JVM's): it is already the newest there, unless a later
			// symbol covers it, which this one then wins back.
			if t.newestAt(e.start) == i {
				continue
			}
		}
		if len(t.syms) >= maxJITSymbols {
			dropped++
			continue
		}
		t.byStart[e.start] = len(t.syms)
		t.syms = append(t.syms, e)
		added = true
	}
	if added {
		if len(t.syms)-t.base > jitRecent {
			t.segs, t.base, t.recent = t.flatten(0, len(t.syms), t.segs[:0]), len(t.syms), t.recent[:0]
		} else {
			t.recent = t.flatten(t.base, len(t.syms), t.recent[:0])
		}
	}
	return dropped
}

// newestAt is the index of the symbol naming pc, -1 for none.
func (t *jitTable) newestAt(pc uint64) int {
	for _, segs := range [][]jitSeg{t.recent, t.segs} {
		i := searchLast(len(segs), func(i int) bool { return segs[i].start <= pc })
		if i >= 0 && pc < segs[i].end {
			return segs[i].sym
		}
	}
	return -1
}

// flatten returns, appended to segs, the segments of syms[lo:hi]: it
// sweeps their edges in address order, keeping the symbols that cover the
// sweep in a heap, newest on top (one that ended is dropped when it comes
// to the top): between two edges, the top names the range.
func (t *jitTable) flatten(lo, hi int, segs []jitSeg) []jitSeg {
	edges := make([]uint64, 0, 2*(hi-lo))
	order := make([]int, 0, hi-lo) // symbols by start
	for i := lo; i < hi; i++ {
		edges = append(edges, t.syms[i].start, t.syms[i].end)
		order = append(order, i)
	}
	slices.Sort(edges)
	edges = slices.Compact(edges)
	slices.SortStableFunc(order, func(a, b int) int { return cmp.Compare(t.syms[a].start, t.syms[b].start) })
	var active newestFirst
	next := 0
	for k, pc := range edges {
		for next < len(order) && t.syms[order[next]].start == pc {
			heap.Push(&active, order[next])
			next++
		}
		for active.Len() > 0 && t.syms[active[0]].end <= pc {
			heap.Pop(&active)
		}
		if active.Len() == 0 || k+1 == len(edges) {
			continue
		}
		top, end := active[0], edges[k+1]
		if n := len(segs); n > 0 && segs[n-1].sym == top && segs[n-1].end == pc {
			segs[n-1].end = end
			continue
		}
		segs = append(segs, jitSeg{start: pc, end: end, sym: top})
	}
	return segs
}

// newestFirst is a max-heap of symbol indexes.
type newestFirst []int

func (h newestFirst) Len() int           { return len(h) }
func (h newestFirst) Less(i, j int) bool { return h[i] > h[j] }
func (h newestFirst) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *newestFirst) Push(x any)        { *h = append(*h, x.(int)) }
func (h *newestFirst) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// lookup returns the newest symbol covering pc.
func (t *jitTable) lookup(pc uint64) (jitEntry, bool) {
	if i := t.newestAt(pc); i >= 0 {
		return t.syms[i], true
	}
	return jitEntry{}, false
}

// jitSource reads one process's perf map and jitdumps as they grow.
type jitSource struct {
	mu      sync.Mutex
	pid     int
	mapPath string // /tmp/perf-NSPID.map, as the process sees it
	mapOff  int64  // the perf map's bytes parsed so far
	mapErr  error  // why the perf map is not read (untrusted, too big); nil: read it
	dumps   map[string]*jitDumpFile
	table   jitTable
	last    time.Time // the last refresh
	warned  bool
	log     *slog.Logger
	// recorded: the symbols come from a recording (AddJITSymbols); no
	// file is read.
	recorded bool
}

type jitDumpFile struct {
	d   JITDump
	err error // why it is no longer read
}

// refresh reads what the process's JIT files gained since the last read,
// and the jitdumps among dumps (paths as the process sees them) that are
// new. force: even if the last refresh was just now.
func (s *jitSource) refresh(dumps []string, force bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.recorded || !force && time.Since(s.last) < jitRefreshEvery {
		return
	}
	s.last = time.Now()
	if s.mapPath == "" {
		ids, err := procfile.ReadIDs(s.pid)
		if err != nil {
			return // gone: what was read stays
		}
		s.mapPath = "/tmp/perf-" + strconv.Itoa(ids.NSPID) + ".map"
	}
	if s.mapErr == nil {
		s.mapErr = s.readPerfMap()
	}
	for _, p := range dumps {
		if s.dumps == nil {
			s.dumps = map[string]*jitDumpFile{}
		}
		if s.dumps[p] == nil && len(s.dumps) < 16 {
			s.dumps[p] = &jitDumpFile{}
		}
	}
	for p, d := range s.dumps {
		if d.err == nil {
			d.err = s.readJITDump(p, d)
		}
	}
}

// readPerfMap parses the perf map's complete lines past mapOff. It returns
// an error only when the map must not be read again.
func (s *jitSource) readPerfMap() error {
	f, err := procfile.OpenOwned(s.pid, s.mapPath, 0)
	if err != nil {
		if errors.Is(err, procfile.ErrUntrusted) {
			s.warn(err)
			return err
		}
		return nil // not written (yet), or the process is gone
	}
	defer f.Close()
	size, err := fileSize(f)
	if err != nil {
		return nil
	}
	if size > maxJITFile {
		err := fmt.Errorf("%s of process %d: %d bytes, more than %d: not read", s.mapPath, s.pid, size, maxJITFile)
		s.warn(err)
		return err
	}
	if size < s.mapOff {
		// Truncated and rewritten (jcmd Compiler.perfmap writes it
		// anew): read it from the start; the newer names win.
		s.mapOff = 0
	}
	// Complete lines are parsed a chunk at a time; the rest of the
	// last line is carried over to the next chunk, or left for the next
	// refresh when the writer has not finished it.
	var carry []byte
	var syms []JITSymbol
	defer func() { s.addSyms(syms, s.mapPath) }() // at once: each add sorts the table
	chunk := make([]byte, min(size-s.mapOff, jitReadChunk))
	for pos := s.mapOff; pos < size; {
		got, rerr := f.ReadAt(chunk[:min(size-pos, int64(len(chunk)))], pos)
		if got == 0 {
			break
		}
		pos += int64(got)
		carry = append(carry, chunk[:got]...)
		more, used, _, perr := ParsePerfMap(carry)
		// Past the bound, one more is kept only for add to say so.
		room := max(maxJITSymbols+1-len(s.table.syms)-len(syms), 0)
		syms = append(syms, more[:min(len(more), room)]...)
		s.mapOff += int64(used)
		carry = append(carry[:0], carry[used:]...)
		if perr != nil {
			s.warn(fmt.Errorf("%s of process %d: %w", s.mapPath, s.pid, perr))
			return perr
		}
		if rerr != nil {
			break
		}
	}
	return nil
}

// readJITDump reads the records a jitdump gained.
func (s *jitSource) readJITDump(p string, d *jitDumpFile) error {
	f, err := procfile.OpenOwned(s.pid, p, 0)
	if err != nil {
		if errors.Is(err, procfile.ErrUntrusted) {
			s.warn(err)
			return err
		}
		return nil
	}
	defer f.Close()
	size, err := fileSize(f)
	if err != nil {
		return nil
	}
	if size > maxJITFile {
		size = maxJITFile // read what fits the bound; no more
	}
	syms, err := d.d.Next(f, size)
	s.addSyms(syms, p)
	if err != nil {
		s.warn(fmt.Errorf("%s of process %d: %w", p, s.pid, err))
		return err
	}
	return nil
}

func (s *jitSource) addSyms(syms []JITSymbol, file string) {
	if n := s.table.add(syms, file); n > 0 {
		s.warn(fmt.Errorf("process %d: more than %d JIT symbols: %d dropped", s.pid, maxJITSymbols, n))
	}
}

// warn logs the first problem with a process's JIT files: the rest are
// most often the same.
func (s *jitSource) warn(err error) {
	if s.warned {
		return
	}
	s.warned = true
	s.log.Warn("JIT symbols not read", "pid", s.pid, "err", err)
}

func (s *jitSource) lookup(pc uint64) (jitEntry, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.table.lookup(pc)
}

func fileSize(f *os.File) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	return st.Size(), nil
}

// jitDumpPaths lists the jitdumps a process has mapped: runtimes map the
// file they write (jit-PID.dump) so that perf sees where it is.
func jitDumpPaths(maps []procfs.Mapping) []string {
	var out []string
	for _, m := range maps {
		b := path.Base(m.Path)
		if strings.HasPrefix(b, "jit-") && strings.HasSuffix(b, ".dump") && !slices.Contains(out, m.Path) {
			out = append(out, m.Path)
		}
	}
	return out
}

// hasAnonCode reports whether a capture holds code no file names: JIT code
// (anonymous or memfd mappings), not [vdso] and the like.
func hasAnonCode(maps []procfs.Mapping) bool {
	for _, m := range maps {
		if m.Executable() && anonCode(m.Path) {
			return true
		}
	}
	return false
}

// anonCode reports whether a mapping's path says no file names its code:
// an anonymous mapping, or a memfd (.NET maps its JIT code twice through
// one).
func anonCode(path string) bool {
	return path == "" || strings.HasPrefix(path, "/memfd:") || strings.HasPrefix(path, "[anon")
}

// jitSourceOf returns pid's JIT source, made on first use when create.
func (r *Resolver) jitSourceOf(pid int, create bool) *jitSource {
	r.jitMu.Lock()
	defer r.jitMu.Unlock()
	s := r.jits[pid]
	if s == nil && create && !r.offline {
		if r.jits == nil {
			r.jits = map[int]*jitSource{}
		}
		s = &jitSource{pid: pid, log: r.log}
		r.jits[pid] = s
	}
	return s
}

// refreshJIT reads pid's JIT maps after a capture of maps.
func (r *Resolver) refreshJIT(pid int, maps []procfs.Mapping) {
	dumps := jitDumpPaths(maps)
	if len(dumps) == 0 && !hasAnonCode(maps) && r.jitSourceOf(pid, false) == nil {
		return
	}
	r.jitSourceOf(pid, true).refresh(dumps, true)
}

// RereadJIT reads process pid's perf map again from its start, and its
// jitdumps' new records, now: after a runtime was asked to write its map
// anew (the JVM's Compiler.perfmap truncates and rewrites it). Names read
// now win over older ones for the same addresses.
func (r *Resolver) RereadJIT(pid int) {
	if s := r.jitSourceOf(pid, true); s != nil {
		s.mu.Lock()
		s.mapOff = 0
		s.mu.Unlock()
		s.refresh(nil, true)
	}
}

// jitFrame names the return address ret (call at pc) of pid from its JIT
// maps, re-reading them (at most every jitRefreshEvery) when they do not
// cover pc yet.
func (r *Resolver) jitFrame(pid int, ret, pc uint64, refresh bool) (Frame, bool) {
	s := r.jitSourceOf(pid, refresh)
	if s == nil {
		return Frame{}, false
	}
	e, ok := s.lookup(pc)
	if !ok && refresh {
		s.refresh(nil, false)
		e, ok = s.lookup(pc)
	}
	if !ok {
		return Frame{}, false
	}
	return Frame{Address: ret, CallAddress: pc, Function: e.name, Module: e.file, Offset: pc - e.start, JIT: true}, true
}

// forgetJIT drops pid's JIT symbols.
func (r *Resolver) forgetJIT(pid int) {
	r.jitMu.Lock()
	delete(r.jits, pid)
	r.jitMu.Unlock()
}
