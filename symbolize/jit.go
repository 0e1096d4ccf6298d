package symbolize

import (
	"cmp"
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

	"github.com/memtrace/memtrace/procroot"
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
// collector is reused for other code.
type jitTable struct {
	syms   []jitEntry // sorted by start
	maxEnd []uint64   // maxEnd[i]: the largest end among syms[:i+1]
	seq    uint32
}

type jitEntry struct {
	start, end uint64
	seq        uint32 // order of reading: newer is larger
	name       string
	file       string // the map or dump that named it, as the process sees it
}

// add adds syms, read from file after every symbol already there. It
// reports how many it dropped for the size bound.
func (t *jitTable) add(syms []JITSymbol, file string) (dropped int) {
	if len(syms) == 0 {
		return 0
	}
	for _, s := range syms {
		if len(t.syms) >= maxJITSymbols {
			dropped++
			continue
		}
		t.seq++
		t.syms = append(t.syms, jitEntry{start: s.Start, end: s.Start + s.Size, seq: t.seq, name: s.Name, file: file})
	}
	slices.SortStableFunc(t.syms, func(a, b jitEntry) int { return cmp.Compare(a.start, b.start) })
	t.maxEnd = t.maxEnd[:0]
	var m uint64
	for _, e := range t.syms {
		m = max(m, e.end)
		t.maxEnd = append(t.maxEnd, m)
	}
	return dropped
}

// lookup returns the newest symbol covering pc.
func (t *jitTable) lookup(pc uint64) (jitEntry, bool) {
	i := searchLast(len(t.syms), func(i int) bool { return t.syms[i].start <= pc })
	var best jitEntry
	found := false
	// Only symbols before i can cover pc, and only while some symbol up
	// to there ends past pc.
	for j := i; j >= 0 && t.maxEnd[j] > pc; j-- {
		if e := t.syms[j]; e.end > pc && (!found || e.seq > best.seq) {
			best, found = e, true
		}
	}
	return best, found
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
	if !force && time.Since(s.last) < jitRefreshEvery {
		return
	}
	s.last = time.Now()
	if s.mapPath == "" {
		ids, err := procroot.ReadIDs(s.pid)
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
	f, err := procroot.Open(s.pid, s.mapPath)
	if err != nil {
		if errors.Is(err, procroot.ErrUntrusted) {
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
	chunk := make([]byte, min(size-s.mapOff, jitReadChunk))
	for pos := s.mapOff; pos < size; {
		got, rerr := f.ReadAt(chunk[:min(size-pos, int64(len(chunk)))], pos)
		if got == 0 {
			break
		}
		pos += int64(got)
		carry = append(carry, chunk[:got]...)
		syms, used, _, perr := ParsePerfMap(carry)
		s.addSyms(syms, s.mapPath)
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
	f, err := procroot.Open(s.pid, p)
	if err != nil {
		if errors.Is(err, procroot.ErrUntrusted) {
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
func jitDumpPaths(maps []Mapping) []string {
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
func hasAnonCode(maps []Mapping) bool {
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
func (r *Resolver) refreshJIT(pid int, maps []Mapping) {
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
