package session

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/memtrace/memtrace/aggregate"
	"github.com/memtrace/memtrace/leakcheck"
	"github.com/memtrace/memtrace/report"
	"github.com/memtrace/memtrace/symbolize"
)

// writeReport writes a report in the chosen format, then what the leak
// check adds (writeReport).
func (s *session) writeReport(snap aggregate.Snapshot, o report.Options) error {
	k := s.objs.Kernel()
	o.Kernel, o.Attach = k.Release, string(k.Attach)
	var leaks *leakState
	if s.cfg.LeakCheck {
		leaks = s.leaks()
	}
	return writeReport(s.cfg.output(s.out, s.stderr, s.cfg.JSON), snap, s.res, o, leaks)
}

// output is where reports go with these flags.
func (c *LeakConfig) output(out, stderr io.Writer, json bool) reportOutput {
	w := reportOutput{out: out, stderr: stderr, json: json}
	if c.jsonFile != nil { // a nil *os.File is no nil io.Writer
		w.jsonFile = c.jsonFile
	}
	return w
}

// reportOutput is where reports go: stdout (or -o) in text or NDJSON, the
// --json-file copy, stderr for what NDJSON cannot carry.
type reportOutput struct {
	out, stderr io.Writer
	json        bool
	jsonFile    io.Writer // nil without --json-file
}

// writeReport writes a report in the chosen format, then what the leak
// check adds (leaks nil: no check): its section (text), the NDJSON copy
// (--json-file) and the CI annotations. A live run and a replay write
// theirs with it.
func writeReport(w reportOutput, snap aggregate.Snapshot, res *symbolize.Resolver, o report.Options, leaks *leakState) error {
	if leaks != nil {
		o.Leaks = leaks
	}
	if w.json {
		if err := report.WriteJSON(w.out, snap, res, o); err != nil {
			return err
		}
	} else if err := report.WriteText(w.out, snap, res, o); err != nil {
		return err
	}
	if w.jsonFile != nil {
		if err := report.WriteJSON(w.jsonFile, snap, res, o); err != nil {
			return fmt.Errorf("--json-file: %w", err)
		}
	}
	if leaks == nil {
		return nil
	}
	// Each checked process's leak section once, after its final report.
	var done []*leakResult
	for _, p := range snap.Processes {
		r := leaks.results[int(p.PID)]
		if r == nil || leaks.printed[r.pid] || !o.Final {
			continue
		}
		leaks.printed[r.pid] = true
		done = append(done, r)
	}
	if len(done) == 0 {
		return nil
	}
	// With --json, stdout is NDJSON only: the records carry the figures,
	// and the listing goes to stderr when --fail-on-leak may fail the run.
	out, listed := w.out, done
	if w.json {
		out = w.stderr
		if !leaks.cfg.FailOnLeak {
			listed = nil
		}
	}
	var b bytes.Buffer
	for _, r := range listed {
		leaks.writeLeakText(&b, r)
	}
	if _, err := out.Write(b.Bytes()); err != nil {
		return err
	}
	if os.Getenv("GITHUB_ACTIONS") == "true" {
		var a bytes.Buffer
		for _, r := range done {
			leaks.writeAnnotations(&a, r)
		}
		w.stderr.Write(a.Bytes())
	}
	return nil
}

// writeLeakText prints a process's leak summary as valgrind does, then its
// lost blocks by call site, with stacks.
func (l *leakState) writeLeakText(b *bytes.Buffer, r *leakResult) {
	fmt.Fprintf(b, "\npid %d %s: leak check %s\n", r.pid, r.comm, r.when)
	if r.err != nil {
		fmt.Fprintf(b, "  leak check failed: %v\n", r.err)
		return
	}
	t := r.totals
	for _, c := range leakcheck.Classes {
		fmt.Fprintf(b, "  %16s: %s bytes in %s blocks\n", c.Title(),
			strconv.FormatUint(t.Bytes[c], 10), strconv.FormatUint(t.Blocks[c], 10))
	}
	if len(r.heuristic) > 0 {
		fmt.Fprintf(b, "  %16s  of which reachable via heuristic:\n", "")
		for _, h := range []leakcheck.Heuristic{leakcheck.StdString, leakcheck.Length64, leakcheck.NewArray, leakcheck.MultipleInheritance} {
			if v := r.heuristic[h]; v != nil {
				fmt.Fprintf(b, "  %16s    %-19s: %d bytes in %d blocks\n", "", h, v[0], v[1])
			}
		}
	}
	fmt.Fprintf(b, "  %16s: %d bytes in %d blocks\n", "suppressed", r.suppBytes, r.suppBlocks)
	shown := r.shownRecords(l.cfg.LeakKinds)
	if len(shown) == 0 {
		return
	}
	fmt.Fprintf(b, "\n  lost blocks by call site (%s):\n", shownKinds(l.cfg.LeakKinds))
	for _, lr := range shown {
		total := strconv.FormatUint(lr.bytes, 10)
		if lr.class == leakcheck.Definite && lr.indirect > 0 {
			total = fmt.Sprintf("%d (%d direct, %d indirect)", lr.bytes+lr.indirect, lr.bytes, lr.indirect)
		}
		fmt.Fprintf(b, "  %s bytes in %d blocks are %s", total, lr.blocks, lr.class.Title())
		if l.cfg.FailOnLeak && l.cfg.LeakKinds.Has(lr.class) {
			b.WriteString(" [counted by --fail-on-leak]")
		}
		b.WriteByte('\n')
		for i, f := range lr.frames {
			prefix := "at"
			if i > 0 {
				prefix = "by"
			}
			fn, loc, mod := frameLabels(f)
			fmt.Fprintf(b, "      %s %s  %s  %s\n", prefix, fn, loc, mod)
		}
		if lr.truncated {
			b.WriteString("      ... (stack truncated: no frame pointer, or --stack-depth reached)\n")
		}
	}
}

// shownRecords are the records printed: every lost class, and the still
// reachable ones when --leak-kinds counts them.
func (r *leakResult) shownRecords(kinds leakcheck.Kinds) []lossRecord {
	var out []lossRecord
	for _, lr := range r.records {
		if lr.class != leakcheck.Reachable || kinds.Has(leakcheck.Reachable) {
			out = append(out, lr)
		}
	}
	return out
}

func shownKinds(kinds leakcheck.Kinds) string {
	k := kinds | leakcheck.KindsOf(leakcheck.Definite, leakcheck.Indirect, leakcheck.Possible)
	return k.String()
}

// frameLabels are a frame's function, file:line and module as reports
// print them.
func frameLabels(f symbolize.Frame) (string, string, string) {
	fn := f.Function
	if fn == "" {
		fn = "[unknown]"
		if f.Module != "" {
			fn = fmt.Sprintf("[unknown] %s+%#x", filepath.Base(f.Module), f.Offset)
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
		mod = filepath.Base(f.Module)
	}
	return fn, loc, mod
}

// writeAnnotations prints GitHub Actions workflow commands for the lost
// blocks: ::error for the classes --fail-on-leak counts, ::warning for the
// other lost ones, at the first frame of each stack that has a source line
// (in the workspace when there is one).
func (l *leakState) writeAnnotations(b *bytes.Buffer, r *leakResult) {
	if r.err != nil {
		return
	}
	ws := os.Getenv("GITHUB_WORKSPACE")
	for _, lr := range r.records {
		if lr.class == leakcheck.Reachable {
			continue
		}
		level := "warning"
		if l.cfg.FailOnLeak && l.cfg.LeakKinds.Has(lr.class) {
			level = "error"
		}
		f, ok := annotationFrame(lr.frames, ws)
		if !ok {
			continue
		}
		file := workspaceFile(f.File, ws, r.cwd)
		fn, _, _ := frameLabels(lr.frames[0])
		msg := fmt.Sprintf("%d bytes in %d blocks %s, allocated in %s (pid %d %s)",
			lr.bytes, lr.blocks, lr.class.Title(), fn, r.pid, r.comm)
		fmt.Fprintf(b, "::%s file=%s,line=%d,title=%s::%s\n", level, escapeProperty(file), f.Line,
			escapeProperty("memtrace: "+lr.class.Title()), escapeData(msg))
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
