package leakcheck

import (
	"cmp"
	"errors"
	"fmt"
	"io"
	"iter"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/symbolize"
	"github.com/memtrace/memtrace/internal/textsafe"
)

// Judging: a check's classes are facts about the process; which of them
// matter is the user's choice (suppressions, --leak-kinds,
// --fail-on-leak). A live run and a replay of its recording judge the
// same blocks with the same code, so that a replay can judge them again
// with other settings.

// ErrDoesNotApply marks a check that cannot apply to the process (a Go
// program's heap is garbage-collected, not malloc's): its verdict says
// so, and --fail-on-leak does not fail on it.
var ErrDoesNotApply = errors.New("does not apply")

// VerdictError is a recorded verdict's error as an error again (a
// recording keeps its text): one that does not apply stays one.
func VerdictError(text string) error {
	if text == "" {
		return nil
	}
	if rest, ok := strings.CutPrefix(text, ErrDoesNotApply.Error()); ok {
		return fmt.Errorf("%w%s", ErrDoesNotApply, rest)
	}
	return errors.New(text)
}

// Settings are the user's choices for judging checks.
type Settings struct {
	Kinds        Kinds
	FailOnLeak   bool
	FailBytes    uint64
	Suppressions Suppressions
}

// SiteBlock is a checked block with its call site and what the check
// concluded about it.
type SiteBlock struct {
	Addr, Size uint64
	Site       aggregate.SiteKey
	Class      Class
	// Heuristic: the heuristic that alone reached a Reachable block.
	Heuristic Heuristic
	// Indirect: for a Definite block, the bytes lost through it.
	Indirect uint64
}

// Each yields blocks in turn, for Judge.
func Each(blocks []SiteBlock) iter.Seq[*SiteBlock] {
	return func(yield func(*SiteBlock) bool) {
		for i := range blocks {
			if !yield(&blocks[i]) {
				return
			}
		}
	}
}

// SortBlocks sorts blocks by address, the order a check keeps them in.
func SortBlocks(blocks []SiteBlock) {
	slices.SortFunc(blocks, func(a, b SiteBlock) int { return cmp.Compare(a.Addr, b.Addr) })
}

// Verdict is one process's judged check.
type Verdict struct {
	PID  int
	Comm string
	Cwd  string // its working directory (to place relative source paths)
	When string // "at exit", "when the run ended"
	Err  error
	Took time.Duration
	// ScannedBytes: the bytes the check read.
	ScannedBytes uint64
	// PythonBytes and PythonBlocks: the live pymalloc blocks, scanned for
	// the pointers they hold but not judged: Python's garbage collector
	// owns them, and a cycle it has not collected yet is not lost.
	PythonBytes, PythonBlocks uint64
	// Totals exclude suppressed blocks, which SuppBytes and SuppBlocks count.
	Totals                Totals
	SuppBytes, SuppBlocks uint64
	Sites                 map[aggregate.SiteKey]*SiteVerdict
	Records               []LossRecord
	// Counted: the bytes of the classes Settings.Kinds counts.
	Counted uint64
	// ViaHeuristic: the still reachable blocks only a heuristic reached,
	// by heuristic, as bytes and blocks (valgrind's "of which reachable
	// via heuristic").
	ViaHeuristic map[Heuristic]*[2]uint64
}

// SiteVerdict is one call site's part of a Verdict.
type SiteVerdict struct {
	Totals                Totals
	SuppBytes, SuppBlocks uint64
}

// LossRecord groups the unsuppressed blocks of one class from one stack,
// as valgrind's loss records do.
type LossRecord struct {
	Class    Class
	Site     aggregate.SiteKey
	Bytes    uint64
	Blocks   uint64
	Indirect uint64 // definitely lost: the bytes lost through these blocks
	Frames   []symbolize.Frame
	// Truncated: the stack stops short of main (no frame pointers).
	Truncated bool
	key       string // the stack as grouped
}

// StackFunc gives a site's symbolized stack and whether it was cut short.
type StackFunc func(pid int, site aggregate.SiteKey) ([]symbolize.Frame, bool)

// Judge keeps the judged checks of a run.
type Judge struct {
	Settings
	Verdicts map[int]*Verdict
	// Over: the processes whose counted bytes exceed FailBytes.
	Over []*Verdict
}

// NewJudge returns a Judge with no result yet.
func NewJudge(s Settings) *Judge {
	return &Judge{Settings: s, Verdicts: map[int]*Verdict{}}
}

// Judge applies the suppressions and Kinds to a check's blocks (by
// address; Each turns a slice into them) and keeps r: its figures per
// process and per site, its loss records, and whether it fails
// --fail-on-leak.
func (j *Judge) Judge(r *Verdict, blocks iter.Seq[*SiteBlock], stacks StackFunc) {
	j.Verdicts[r.PID] = r
	if r.Err != nil {
		return
	}
	r.Sites = map[aggregate.SiteKey]*SiteVerdict{}
	j.classify(r, blocks, stacks)
	if j.FailOnLeak && r.Counted > j.FailBytes {
		j.Over = append(j.Over, r)
	}
}

// classify applies the suppressions and sums the classes per process and
// per site.
func (j *Judge) classify(r *Verdict, blocks iter.Seq[*SiteBlock], stacks StackFunc) {
	type key struct {
		site  aggregate.SiteKey
		class Class
	}
	frames := map[aggregate.SiteKey][]symbolize.Frame{}
	truncated := map[aggregate.SiteKey]bool{}
	stackOf := func(site aggregate.SiteKey) []symbolize.Frame {
		if f, ok := frames[site]; ok {
			return f
		}
		f, tr := stacks(r.PID, site)
		frames[site], truncated[site] = f, tr
		return f
	}
	supp := map[key]*Suppression{}
	// Loss records group by the stack as checked and printed: two sites
	// whose raw stacks differ only past where the walk was cut are one.
	type recordKey struct {
		class Class
		stack string
	}
	records := map[recordKey]*LossRecord{}
	stackKey := map[aggregate.SiteKey]string{}
	keyOf := func(site aggregate.SiteKey) string {
		if k, ok := stackKey[site]; ok {
			return k
		}
		var b strings.Builder
		for _, f := range stackOf(site) {
			b.WriteString(strconv.FormatUint(f.Address, 16))
			b.WriteByte(' ')
		}
		if truncated[site] {
			b.WriteString("...")
		}
		stackKey[site] = b.String()
		return stackKey[site]
	}
	// Blocks next to each other often share their site and class: the
	// last one's look-ups are kept (millions of blocks, a few sites).
	var last key
	var lastSup *Suppression
	var lastSl *SiteVerdict
	var lastLr *LossRecord
	for b := range blocks {
		c := b.Class
		k := key{b.Site, c}
		if lastSl == nil || k != last {
			sup, seen := supp[k]
			if !seen {
				sup = j.Suppressions.Match(c, MatchFrames(stackOf(b.Site)))
				supp[k] = sup
			}
			sl := r.Sites[b.Site]
			if sl == nil {
				sl = &SiteVerdict{}
				r.Sites[b.Site] = sl
			}
			last, lastSup, lastSl, lastLr = k, sup, sl, nil
		}
		sup, sl := lastSup, lastSl
		if sup != nil {
			r.SuppBytes += b.Size
			r.SuppBlocks++
			sl.SuppBytes += b.Size
			sl.SuppBlocks++
			continue
		}
		r.Totals.Add(c, b.Size)
		sl.Totals.Add(c, b.Size)
		if h := b.Heuristic; h != 0 && c == Reachable {
			if r.ViaHeuristic == nil {
				r.ViaHeuristic = map[Heuristic]*[2]uint64{}
			}
			if r.ViaHeuristic[h] == nil {
				r.ViaHeuristic[h] = &[2]uint64{}
			}
			r.ViaHeuristic[h][0] += b.Size
			r.ViaHeuristic[h][1]++
		}
		if j.Kinds.Has(c) {
			r.Counted += b.Size
		}
		lr := lastLr
		if lr == nil {
			rk := recordKey{c, keyOf(b.Site)}
			lr = records[rk]
			if lr == nil {
				lr = &LossRecord{Class: c, Site: b.Site, key: rk.stack}
				records[rk] = lr
			}
			lastLr = lr
		}
		lr.Bytes += b.Size
		lr.Blocks++
		lr.Indirect += b.Indirect
	}
	for _, lr := range records {
		lr.Frames, lr.Truncated = stackOf(lr.Site), truncated[lr.Site]
		r.Records = append(r.Records, *lr)
	}
	// Largest first, then by class (definite first), address and stack,
	// so the order is the same in every run and replay.
	slices.SortFunc(r.Records, func(a, b LossRecord) int {
		if c := cmp.Compare(b.Bytes+b.Indirect, a.Bytes+a.Indirect); c != 0 {
			return c
		}
		if c := cmp.Compare(b.Class, a.Class); c != 0 {
			return c
		}
		if c := cmp.Compare(a.Site.Address, b.Site.Address); c != 0 {
			return c
		}
		return strings.Compare(a.key, b.key)
	})
}

// Shown are the records a report prints: every lost class, and the still
// reachable ones when kinds counts them.
func (r *Verdict) Shown(kinds Kinds) []LossRecord {
	var out []LossRecord
	for _, lr := range r.Records {
		if lr.Class != Reachable || kinds.Has(Reachable) {
			out = append(out, lr)
		}
	}
	return out
}

// MatchFrames turns symbolized frames into what suppressions match.
func MatchFrames(fs []symbolize.Frame) []Frame {
	out := make([]Frame, 0, len(fs))
	for _, f := range fs {
		lf := Frame{Function: f.Function, File: f.File, Module: f.Module}
		for _, in := range f.Inlined {
			lf.Inlined = append(lf.Inlined, InlinedFrame{Function: in.Function, File: in.File})
		}
		out = append(out, lf)
	}
	return out
}

// Failures says whether the run fails --fail-on-leak: over, when a
// checked process lost more than allowed; failed, when a check could not
// run (--fail-on-leak must not pass a build it could not check). It
// writes a line on stderr for each, and one for each check that does not
// apply (neither over nor failed).
func (j *Judge) Failures(stderr io.Writer) (over, failed bool) {
	if !j.FailOnLeak {
		return false, false
	}
	pids := make([]int, 0, len(j.Verdicts))
	for pid := range j.Verdicts {
		pids = append(pids, pid)
	}
	slices.Sort(pids)
	for _, pid := range pids {
		r := j.Verdicts[pid]
		if errors.Is(r.Err, ErrDoesNotApply) {
			fmt.Fprintf(stderr, "memtrace: pid %d %s: leak check %s\n", r.PID, textsafe.String(r.Comm), textsafe.String(r.Err.Error()))
			continue
		}
		if r.Err != nil {
			fmt.Fprintf(stderr, "memtrace: pid %d %s: leak check failed: %s\n", r.PID, textsafe.String(r.Comm), textsafe.String(r.Err.Error()))
			failed = true
		}
	}
	for _, r := range j.Over {
		fmt.Fprintf(stderr, "memtrace: pid %d %s: %d bytes lost (%s) %s, more than --fail-on-leak=%d\n",
			r.PID, textsafe.String(r.Comm), r.Counted, j.Kinds, textsafe.String(r.When), j.FailBytes)
	}
	return len(j.Over) > 0, failed
}
