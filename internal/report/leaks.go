package report

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/leakcheck"
	"github.com/memtrace/memtrace/internal/symbolize"
	"github.com/memtrace/memtrace/internal/textsafe"
)

// Leaks gives a report the leak check's judged results: their figures in
// the tables and records (LeakSource), and each checked process's leak
// section once, after its final report.
type Leaks struct {
	*leakcheck.Judge
	printed map[int]bool
}

// NewLeaks reports what j judged.
func NewLeaks(j *leakcheck.Judge) *Leaks { return &Leaks{Judge: j, printed: map[int]bool{}} }

// ProcessLeaks and SiteLeaks give the report the check's figures
// (LeakSource).
func (l *Leaks) ProcessLeaks(pid uint32) (LeakFigures, bool) {
	r := l.Verdicts[int(pid)]
	if r == nil || r.Err != nil {
		return LeakFigures{}, false
	}
	return leakFigures(r.Totals, r.SuppBytes, r.SuppBlocks), true
}

func (l *Leaks) SiteLeaks(pid uint32, site aggregate.SiteKey) LeakFigures {
	r := l.Verdicts[int(pid)]
	if r == nil || r.Err != nil || r.Sites[site] == nil {
		return LeakFigures{}
	}
	sl := r.Sites[site]
	return leakFigures(sl.Totals, sl.SuppBytes, sl.SuppBlocks)
}

func leakFigures(t leakcheck.Totals, suppBytes, suppBlocks uint64) LeakFigures {
	return LeakFigures{
		DefinitelyLostBytes: t.Bytes[leakcheck.Definite], DefinitelyLostBlocks: t.Blocks[leakcheck.Definite],
		IndirectlyLostBytes: t.Bytes[leakcheck.Indirect], IndirectlyLostBlocks: t.Blocks[leakcheck.Indirect],
		PossiblyLostBytes: t.Bytes[leakcheck.Possible], PossiblyLostBlocks: t.Blocks[leakcheck.Possible],
		ReachableBytes: t.Bytes[leakcheck.Reachable], ReachableBlocks: t.Blocks[leakcheck.Reachable],
		SuppressedBytes: suppBytes, SuppressedBlocks: suppBlocks,
	}
}

// Outputs are where a run's reports go: Out (stdout or -o) in text or
// NDJSON, the --json-file copy, Stderr for what NDJSON cannot carry.
type Outputs struct {
	Out, Stderr io.Writer
	JSON        bool
	JSONFile    io.Writer // nil without --json-file
}

// Write writes a report in the chosen format, then what the leak check
// adds (leaks nil: no check): its section (text), the NDJSON copy
// (--json-file) and the CI annotations. A live run and a replay write
// theirs with it.
func Write(w Outputs, snap aggregate.Snapshot, sym Symbolizer, o Options, leaks *Leaks) error {
	if leaks != nil {
		o.Leaks = leaks
	}
	if w.JSON {
		if err := WriteJSON(w.Out, snap, sym, o); err != nil {
			return err
		}
	} else if err := WriteText(w.Out, snap, sym, o); err != nil {
		return err
	}
	if w.JSONFile != nil {
		if err := WriteJSON(w.JSONFile, snap, sym, o); err != nil {
			return fmt.Errorf("--json-file: %w", err)
		}
	}
	if leaks == nil {
		return nil
	}
	// Each checked process's leak section once, after its final report.
	var done []*leakcheck.Verdict
	for _, p := range snap.Processes {
		r := leaks.Verdicts[int(p.PID)]
		if r == nil || leaks.printed[r.PID] || !o.Final {
			continue
		}
		leaks.printed[r.PID] = true
		done = append(done, r)
	}
	if len(done) == 0 {
		return nil
	}
	// With --json, stdout is NDJSON only: the records carry the figures,
	// and the listing goes to stderr when --fail-on-leak may fail the run.
	out, listed := w.Out, done
	if w.JSON {
		out = w.Stderr
		if !leaks.FailOnLeak {
			listed = nil
		}
	}
	var b bytes.Buffer
	for _, r := range listed {
		writeLeakText(&b, leaks.Judge, r)
	}
	if _, err := out.Write(b.Bytes()); err != nil {
		return err
	}
	if os.Getenv("GITHUB_ACTIONS") == "true" {
		var a bytes.Buffer
		for _, r := range done {
			writeAnnotations(&a, leaks.Judge, r)
		}
		w.Stderr.Write(a.Bytes())
	}
	return nil
}

// writeLeakText prints a process's leak summary as valgrind does, then its
// lost blocks by call site, with stacks.
func writeLeakText(b *bytes.Buffer, l *leakcheck.Judge, r *leakcheck.Verdict) {
	fmt.Fprintf(b, "\npid %d %s: leak check %s\n", r.PID, textsafe.String(r.Comm), textsafe.String(r.When)) // When: a recording's, in a replay
	if errors.Is(r.Err, leakcheck.ErrDoesNotApply) {
		fmt.Fprintf(b, "  leak check %s\n", textsafe.String(r.Err.Error()))
		return
	}
	if r.Err != nil {
		fmt.Fprintf(b, "  leak check failed: %s\n", textsafe.String(r.Err.Error()))
		return
	}
	t := r.Totals
	for _, c := range leakcheck.Classes {
		fmt.Fprintf(b, "  %16s: %s bytes in %s blocks\n", c.Title(),
			strconv.FormatUint(t.Bytes[c], 10), strconv.FormatUint(t.Blocks[c], 10))
	}
	if len(r.ViaHeuristic) > 0 {
		fmt.Fprintf(b, "  %16s  of which reachable via heuristic:\n", "")
		for _, h := range []leakcheck.Heuristic{leakcheck.StdString, leakcheck.Length64, leakcheck.NewArray, leakcheck.MultipleInheritance} {
			if v := r.ViaHeuristic[h]; v != nil {
				fmt.Fprintf(b, "  %16s    %-19s: %d bytes in %d blocks\n", "", h, v[0], v[1])
			}
		}
	}
	fmt.Fprintf(b, "  %16s: %d bytes in %d blocks\n", "suppressed", r.SuppBytes, r.SuppBlocks)
	if r.PythonBlocks > 0 {
		fmt.Fprintf(b, "  %16s: %d bytes in %d blocks, not judged (Python's garbage collector owns them)\n",
			"pymalloc", r.PythonBytes, r.PythonBlocks)
	}
	shown := r.Shown(l.Kinds)
	if len(shown) == 0 {
		return
	}
	fmt.Fprintf(b, "\n  lost blocks by call site (%s):\n", shownKinds(l.Kinds))
	for _, lr := range shown {
		total := strconv.FormatUint(lr.Bytes, 10)
		if lr.Class == leakcheck.Definite && lr.Indirect > 0 {
			total = fmt.Sprintf("%d (%d direct, %d indirect)", lr.Bytes+lr.Indirect, lr.Bytes, lr.Indirect)
		}
		fmt.Fprintf(b, "  %s bytes in %d blocks are %s", total, lr.Blocks, lr.Class.Title())
		if l.FailOnLeak && l.Kinds.Has(lr.Class) {
			b.WriteString(" [counted by --fail-on-leak]")
		}
		b.WriteByte('\n')
		for i, f := range lr.Frames {
			prefix := "at"
			if i > 0 {
				prefix = "by"
			}
			fn, loc, mod := leakFrameLabels(f)
			fmt.Fprintf(b, "      %s %s  %s  %s\n", prefix, fn, loc, mod)
		}
		if lr.Truncated {
			b.WriteString("      ... (stack truncated: no frame pointer, or --stack-depth reached)\n")
		}
	}
}

func shownKinds(kinds leakcheck.Kinds) string {
	k := kinds | leakcheck.KindsOf(leakcheck.Definite, leakcheck.Indirect, leakcheck.Possible)
	return k.String()
}

// frameLabels are a frame's function, file:line and module as reports
// print them.
func leakFrameLabels(f symbolize.Frame) (string, string, string) {
	fn := f.Function
	if fn == "" {
		fn = "[unknown]"
		if f.Module != "" {
			fn = fmt.Sprintf("[unknown] %s+%#x", textsafe.String(filepath.Base(f.Module)), f.Offset)
		}
	}
	loc := "-"
	if f.File != "" {
		loc = f.File
		if f.Line > 0 {
			loc += ":" + strconv.Itoa(f.Line)
		}
	}
	mod := "-"
	if f.Module != "" {
		mod = textsafe.String(filepath.Base(f.Module))
	}
	return textsafe.String(fn), textsafe.String(loc), mod
}

// writeAnnotations prints GitHub Actions workflow commands for the lost
// blocks: ::error for the classes --fail-on-leak counts, ::warning for the
// other lost ones, at the first frame of each stack that has a source line
// (in the workspace when there is one).
func writeAnnotations(b *bytes.Buffer, l *leakcheck.Judge, r *leakcheck.Verdict) {
	if r.Err != nil {
		return
	}
	ws := os.Getenv("GITHUB_WORKSPACE")
	for _, lr := range r.Records {
		if lr.Class == leakcheck.Reachable {
			continue
		}
		level := "warning"
		if l.FailOnLeak && l.Kinds.Has(lr.Class) {
			level = "error"
		}
		f, ok := annotationFrame(lr.Frames, ws)
		if !ok {
			continue
		}
		file := textsafe.String(workspaceFile(f.File, ws, r.Cwd))
		fn, _, _ := leakFrameLabels(lr.Frames[0])
		msg := fmt.Sprintf("%d bytes in %d blocks %s, allocated in %s (pid %d %s)",
			lr.Bytes, lr.Blocks, lr.Class.Title(), fn, r.PID, textsafe.String(r.Comm))
		fmt.Fprintf(b, "::%s file=%s,line=%d,title=%s::%s\n", level, escapeProperty(file), f.Line,
			escapeProperty("memtrace: "+lr.Class.Title()), escapeData(msg))
	}
}

// annotationFrame picks the innermost frame with a source line, preferring
// one inside the workspace.
func annotationFrame(fs []symbolize.Frame, ws string) (symbolize.Frame, bool) {
	var first *symbolize.Frame
	for i := range fs {
		f := &fs[i]
		if f.File == "" || f.Line == 0 {
			continue
		}
		if first == nil {
			first = f
		}
		if ws == "" || !filepath.IsAbs(f.File) || strings.HasPrefix(f.File, ws+"/") {
			return *f, true
		}
	}
	if first != nil {
		return *first, true
	}
	return symbolize.Frame{}, false
}

// workspaceFile names a source file as GitHub wants it: relative to the
// workspace. Debug information often names files relative to the
// directory they were compiled in, which it does not say here: the
// process's and memtrace's working directories are tried, then the
// workspace itself.
func workspaceFile(file, ws, targetCwd string) string {
	if ws == "" {
		return file
	}
	var candidates []string
	if filepath.IsAbs(file) {
		candidates = append(candidates, file)
	} else {
		if targetCwd != "" {
			candidates = append(candidates, filepath.Join(targetCwd, file))
		}
		if wd, err := os.Getwd(); err == nil {
			candidates = append(candidates, filepath.Join(wd, file))
		}
		rest := filepath.Clean(file)
		for strings.HasPrefix(rest, "../") {
			rest = rest[3:]
		}
		candidates = append(candidates, filepath.Join(ws, rest))
	}
	for _, c := range candidates {
		rel, err := filepath.Rel(ws, c)
		if err != nil || strings.HasPrefix(rel, "..") {
			continue
		}
		if _, err := os.Stat(c); err == nil {
			return rel
		}
	}
	return file
}

// GitHub's escaping of workflow command data and properties.
func escapeData(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A").Replace(s)
}

func escapeProperty(s string) string {
	return strings.NewReplacer("%", "%25", "\r", "%0D", "\n", "%0A", ":", "%3A", ",", "%2C").Replace(s)
}
