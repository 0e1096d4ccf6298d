package pipeline

import (
	"io"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/leakcheck"
	"github.com/memtrace/memtrace/internal/recording"
	"github.com/memtrace/memtrace/internal/report"
	"github.com/memtrace/memtrace/internal/symbolize"
)

// ExitLeak is memtrace's status when --fail-on-leak found more lost bytes
// than allowed (docs/cli.md, docs/ci.md). It replaces the command's own.
const ExitLeak = 10

// Leaks are a run's judged leak checks, live or replayed: the judge, and
// the report's view of them (each leak section printed once).
type Leaks struct {
	// Judge keeps the results, judged with the run's suppressions,
	// --leak-kinds and --fail-on-leak.
	Judge *leakcheck.Judge
	Shown *report.Leaks
}

// NewLeaks judges checks with cfg's leak flags.
func NewLeaks(cfg *LeakConfig) *Leaks {
	j := leakcheck.NewJudge(cfg.Settings())
	return &Leaks{Judge: j, Shown: report.NewLeaks(j)}
}

// Settings are the leak flags that judge a check.
func (c *LeakConfig) Settings() leakcheck.Settings {
	return leakcheck.Settings{Kinds: c.LeakKinds, FailOnLeak: c.FailOnLeak, FailBytes: c.FailBytes, Suppressions: c.Suppressions}
}

// Outputs are where reports go with these flags.
func (c *LeakConfig) Outputs(out, stderr io.Writer, json bool) report.Outputs {
	w := report.Outputs{Out: out, Stderr: stderr, JSON: json}
	if c.jsonFile != nil { // a nil *os.File is no nil io.Writer
		w.JSONFile = c.jsonFile
	}
	return w
}

// LeakStacks gives the leak check each site's stack: the whole one with
// --detail (stacks set), otherwise its call site alone.
type LeakStacks struct {
	Stacks report.StackSource // nil without --detail
	Res    *symbolize.Resolver
}

// Of is a leakcheck.StackFunc.
func (l LeakStacks) Of(pid int, site aggregate.SiteKey) ([]symbolize.Frame, bool) {
	if l.Stacks != nil {
		st := l.Stacks.Stack(uint32(pid), aggregate.SiteSnapshot{Address: site.Address, StackID: site.StackID})
		if len(st.Frames) > 0 {
			return st.Frames, st.Truncated
		}
	}
	f := l.Res.Resolve(pid, site.Address)
	if f.Address == 0 {
		f.Address = site.Address
	}
	return []symbolize.Frame{f}, l.Stacks != nil
}

// ExitCode is memtrace's status: ExitLeak when a checked process lost
// more than --fail-on-leak allows, ExitError when a check could not run,
// with a line on stderr for each.
func (l *Leaks) ExitCode(code int, stderr io.Writer) int {
	over, failed := l.Judge.Failures(stderr)
	switch {
	case over:
		return ExitLeak
	case failed:
		return ExitError
	}
	return code
}

// RecordedLeakSettings are the live run's leak settings for the
// recording's info.
func (c *LeakConfig) RecordedLeakSettings(info *recording.Info) {
	if !c.LeakCheck {
		return
	}
	info.LeakCheck = true
	info.LeakKinds = c.LeakKinds.String()
	if c.FailOnLeak {
		info.FailOnLeak = &c.FailBytes
	}
	for _, s := range c.Suppressions {
		if s.Source != "default" {
			info.Suppressions = append(info.Suppressions, s.Pattern)
		}
	}
	info.NoDefaultSuppressions = c.NoDefaultSupp
}
