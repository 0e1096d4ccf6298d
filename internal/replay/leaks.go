package replay

import (
	"errors"
	"fmt"

	"github.com/memtrace/memtrace/internal/leakcheck"
	"github.com/memtrace/memtrace/internal/pipeline"
	"github.com/memtrace/memtrace/internal/recording"
)

// ReplayLeakFlags says which leak flags a replay was given; each one not
// given is the recorded run's.
type ReplayLeakFlags struct {
	// Kinds: --leak-kinds. Fail: --fail-on-leak. Suppressions:
	// --suppressions or --no-default-suppressions (pipeline.LeakConfig.Suppressions
	// is then the whole set, defaults included unless refused).
	Kinds, Fail, Suppressions bool
}

// errNoLeakCheck: the replay asks for leak figures the recording lacks.
var errNoLeakCheck = errors.New("the recording holds no leak check (the run was made without one, or by a memtrace that did not record it)")

// leakSettings are the replay's leak settings: the flags given, the
// recorded run's for the others.
func (c *ReplayConfig) leakSettings(info recording.Info) (pipeline.LeakConfig, error) {
	l := c.LeakConfig
	if !c.LeakCheckSet {
		l.LeakCheck = info.LeakCheck
	}
	refused := c.LeakCheckSet && !c.LeakCheck
	if !c.LeakSet.Fail && info.FailOnLeak != nil && !refused {
		l.FailOnLeak, l.FailBytes = true, *info.FailOnLeak
	}
	if l.FailOnLeak && !l.LeakCheck {
		if refused {
			return l, fmt.Errorf("--fail-on-leak needs the leak check (drop --leak-check=false)")
		}
		l.LeakCheck = true
	}
	if l.LeakCheck && !info.LeakCheck {
		if c.LeakCheckSet || c.LeakSet.Fail {
			return l, fmt.Errorf("%s: %w", c.File, errNoLeakCheck)
		}
		l.LeakCheck = false
	}
	if !c.LeakSet.Kinds {
		l.LeakKinds = leakcheck.KindsOf(leakcheck.Definite, leakcheck.Indirect)
		if info.LeakKinds != "" {
			k, err := leakcheck.ParseKinds(info.LeakKinds)
			if err != nil {
				return l, fmt.Errorf("%s: recorded --leak-kinds: %w", c.File, err)
			}
			l.LeakKinds = k
		}
	}
	if !c.LeakSet.Suppressions {
		l.Suppressions = nil
		for _, p := range info.Suppressions {
			l.Suppressions = append(l.Suppressions, leakcheck.Suppression{Pattern: p, Source: "recording", Kinds: leakcheck.AllKinds})
		}
		if !info.NoDefaultSuppressions {
			l.Suppressions = append(l.Suppressions, leakcheck.DefaultSuppressions...)
		}
	}
	return l, nil
}

// judgeLeaks judges the recorded leak checks with cfg, as the live run
// judged them with its own flags (nil: no leak check to show).
func (rp *replayed) judgeLeaks(cfg *pipeline.LeakConfig) *pipeline.Leaks {
	if !cfg.LeakCheck {
		return nil
	}
	l := pipeline.NewLeaks(cfg)
	stacks := pipeline.LeakStacks{Res: rp.res}
	if rp.info.Detail {
		stacks.Stacks = rp.recordedStacks()
	}
	for i := range rp.leakChecks {
		c := &rp.leakChecks[i]
		r := &leakcheck.Verdict{PID: int(c.PID), Comm: c.Comm, Cwd: c.Cwd, When: c.When, ScannedBytes: c.ScannedBytes}
		r.Err = leakcheck.VerdictError(c.Err)
		l.Judge.Judge(r, leakcheck.Each(c.Blocks), stacks.Of)
	}
	return l
}
