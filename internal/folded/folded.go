// Package folded writes folded stacks, the text format of flamegraph.pl,
// inferno and speedscope: one line per distinct stack, its frames from the
// outermost caller to the call site joined by ";", a space, a value.
package folded

import (
	"bufio"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/google/pprof/profile"

	"github.com/memtrace/memtrace/internal/pprofout"
	"github.com/memtrace/memtrace/internal/textsafe"
)

// Value selects what the lines count.
type Value int

const (
	Live      Value = iota // live bytes
	Allocated              // bytes allocated over the run
	Allocs                 // allocations made
	Resident               // resident bytes by who made them resident (estimates)
)

// ParseValue reads --folded-value's argument.
func ParseValue(s string) (Value, error) {
	switch s {
	case "live":
		return Live, nil
	case "allocated":
		return Allocated, nil
	case "allocs":
		return Allocs, nil
	case "resident":
		return Resident, nil
	}
	return 0, fmt.Errorf("folded value %q: want live, allocated, allocs or resident", s)
}

func (v Value) sampleIndex() int {
	switch v {
	case Allocated:
		return pprofout.AllocSpace
	case Allocs:
		return pprofout.AllocObjects
	case Resident:
		return pprofout.ResidentSpace
	}
	return pprofout.InuseSpace
}

// Stack is one folded line: frames outermost first, and its value.
type Stack struct {
	Frames []string
	Value  int64
}

// Stacks folds a profile built by pprofout: identical stacks are summed,
// zero values dropped, and the result sorted by stack. Inlined functions
// are frames of their own. When the profile holds several processes, each
// stack starts with a frame "COMM (PID)", or "COMM (exited)" for the
// processes of one comm that exited during a whole-host run.
func Stacks(p *profile.Profile, v Value) []Stack {
	idx := v.sampleIndex()
	pids := map[string]bool{}
	for _, s := range p.Sample {
		pids[processFrame(s)] = true
	}
	sums := map[string]int64{}
	for _, s := range p.Sample {
		if s.Value[idx] == 0 {
			continue
		}
		var frames []string
		if len(pids) > 1 {
			frames = append(frames, processFrame(s))
		}
		for i := len(s.Location) - 1; i >= 0; i-- {
			l := s.Location[i]
			if len(l.Line) == 0 {
				frames = append(frames, clean(pprofout.UnknownName(l)))
				continue
			}
			for j := len(l.Line) - 1; j >= 0; j-- {
				frames = append(frames, clean(l.Line[j].Function.Name))
			}
		}
		sums[strings.Join(frames, ";")] += s.Value[idx]
	}
	out := make([]Stack, 0, len(sums))
	for k, n := range sums {
		out = append(out, Stack{Frames: strings.Split(k, ";"), Value: n})
	}
	slices.SortFunc(out, func(a, b Stack) int { return cmp.Compare(strings.Join(a.Frames, ";"), strings.Join(b.Frames, ";")) })
	return out
}

// Write writes the folded lines of p to w.
func Write(w io.Writer, p *profile.Profile, v Value) error {
	bw := bufio.NewWriter(w)
	for _, s := range Stacks(p, v) {
		bw.WriteString(strings.Join(s.Frames, ";"))
		bw.WriteByte(' ')
		bw.WriteString(strconv.FormatInt(s.Value, 10))
		bw.WriteByte('\n')
	}
	if err := bw.Flush(); err != nil {
		return fmt.Errorf("write folded stacks: %w", err)
	}
	return nil
}

func processFrame(s *profile.Sample) string {
	comm := ""
	if c := s.Label["comm"]; len(c) > 0 {
		comm = c[0]
	}
	if len(s.Label[pprofout.ExitedLabel]) > 0 {
		return clean(comm) + " (exited)"
	}
	pid := int64(0)
	if p := s.NumLabel["pid"]; len(p) > 0 {
		pid = p[0]
	}
	return clean(comm) + " (" + strconv.FormatInt(pid, 10) + ")"
}

// clean keeps a name from breaking the format: ";" separates frames, a
// line break ends the line, and parsers split the value off at the last
// run of white space, so a frame may not end in one. Controls and invalid
// UTF-8 are escaped (textsafe) like in every text memtrace writes, which
// also turns a newline, a tab and a carriage return into two characters.
func clean(name string) string {
	name = strings.ReplaceAll(textsafe.String(name), ";", ":")
	name = strings.TrimRightFunc(name, unicode.IsSpace)
	if name == "" {
		return "[unknown]"
	}
	return name
}
