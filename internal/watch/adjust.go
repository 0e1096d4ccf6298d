package watch

import (
	"fmt"
	"slices"
	"time"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/report"
)

// Settings are the half-lives the rates are kept for and the sampling
// period, which must satisfy 2^-12 ≤ period/half-life ≤ 1 − 2^-12 for
// every half-life (aggregate.CheckHalfLives).
type Settings struct {
	HalfLives []time.Duration
	Period    time.Duration
}

func (s Settings) clone() Settings {
	return Settings{HalfLives: slices.Clone(s.HalfLives), Period: s.Period}
}

// maxHalfLife bounds doubling, far beyond any useful half-life.
const maxHalfLife = 1000 * time.Hour

// Adjust returns cur with half-life i set to t. The period stays the
// configured one (the --period flag) when it allows every half-life;
// otherwise it becomes the period closest to it that does. When no period
// allows them all, the change is refused: the error says why, in words fit
// for the view's message line. msg describes an accepted change.
func Adjust(cur Settings, configured time.Duration, i int, t time.Duration) (next Settings, msg string, err error) {
	if i < 0 || i >= len(cur.HalfLives) {
		return cur, "", fmt.Errorf("no half-life #%d", i+1)
	}
	old := cur.HalfLives[i]
	if t <= 0 || t > maxHalfLife {
		return cur, "", fmt.Errorf("half-life %s refused: out of range", report.HalfLifeText(t))
	}
	next = cur.clone()
	next.HalfLives[i] = t
	lo, hi, ok := aggregate.PeriodRange(next.HalfLives)
	if !ok {
		// Say it by the rule, for the current period.
		why := aggregate.CheckHalfLife(cur.Period, t)
		if why == nil {
			why = fmt.Errorf("no period allows half-lives from %s to %s together", report.HalfLifeText(slices.Min(next.HalfLives)), report.HalfLifeText(slices.Max(next.HalfLives)))
		}
		return cur, "", fmt.Errorf("half-life %s refused: %v, and no other period allows all of %s",
			report.HalfLifeText(t), why, list(next.HalfLives))
	}
	next.Period = min(max(configured, lo), hi)
	if err := aggregate.CheckHalfLives(next.Period, next.HalfLives); err != nil {
		return cur, "", fmt.Errorf("half-life %s refused: %v", report.HalfLifeText(t), err)
	}
	msg = fmt.Sprintf("half-life #%d: %s -> %s", i+1, report.HalfLifeText(old), report.HalfLifeText(t))
	if next.Period != cur.Period {
		msg += fmt.Sprintf("; period %s -> %s", cur.Period, next.Period)
	}
	return next, msg, nil
}

func list(ds []time.Duration) string {
	s := ""
	for i, d := range ds {
		if i > 0 {
			s += ", "
		}
		s += report.HalfLifeText(d)
	}
	return s
}
