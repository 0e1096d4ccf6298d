package replay

import (
	"errors"
	"slices"
	"testing"

	"github.com/memtrace/memtrace/internal/leakcheck"
	"github.com/memtrace/memtrace/internal/pipeline"
	"github.com/memtrace/memtrace/internal/recording"
)

// TestLeakSettings: each leak flag a replay is given wins; the others are
// the recorded run's.
func TestLeakSettings(t *testing.T) {
	defKinds := leakcheck.KindsOf(leakcheck.Definite, leakcheck.Indirect)
	bytes := uint64(48)
	recorded := recording.Info{LeakCheck: true, LeakKinds: "possible", FailOnLeak: &bytes,
		Suppressions: []string{"leaky_function"}, NoDefaultSuppressions: true}
	user := leakcheck.Suppressions{{Pattern: "mine", Source: "f:1", Kinds: leakcheck.AllKinds}}
	type want struct {
		check, fail bool
		failBytes   uint64
		kinds       leakcheck.Kinds
		patterns    []string
		err         error
	}
	tests := []struct {
		name string
		info recording.Info
		c    ReplayConfig
		want want
	}{
		{"older recording", recording.Info{}, ReplayConfig{}, want{kinds: defKinds, patterns: defaultPatterns()}},
		{"recorded without flags", recording.Info{LeakCheck: true}, ReplayConfig{},
			want{check: true, kinds: defKinds, patterns: defaultPatterns()}},
		{"recorded settings", recorded, ReplayConfig{},
			want{check: true, fail: true, failBytes: 48, kinds: leakcheck.KindsOf(leakcheck.Possible), patterns: []string{"leaky_function"}}},
		{"flags win", recorded, ReplayConfig{
			LeakConfig: pipeline.LeakConfig{FailOnLeak: true, FailBytes: 7, LeakKinds: leakcheck.AllKinds, Suppressions: user},
			LeakSet:    ReplayLeakFlags{Kinds: true, Fail: true, Suppressions: true}},
			want{check: true, fail: true, failBytes: 7, kinds: leakcheck.AllKinds, patterns: []string{"mine"}}},
		{"--fail-on-leak=false", recorded, ReplayConfig{LeakSet: ReplayLeakFlags{Fail: true}},
			want{check: true, kinds: leakcheck.KindsOf(leakcheck.Possible), patterns: []string{"leaky_function"}}},
		{"--leak-check=false drops the recorded --fail-on-leak", recorded, ReplayConfig{LeakConfig: pipeline.LeakConfig{LeakCheckSet: true}},
			want{kinds: leakcheck.KindsOf(leakcheck.Possible), patterns: []string{"leaky_function"}}},
		{"--leak-check=false --fail-on-leak", recorded, ReplayConfig{LeakConfig: pipeline.LeakConfig{LeakCheckSet: true, FailOnLeak: true},
			LeakSet: ReplayLeakFlags{Fail: true}}, want{err: errAny}},
		{"--fail-on-leak, nothing recorded", recording.Info{}, ReplayConfig{LeakConfig: pipeline.LeakConfig{FailOnLeak: true},
			LeakSet: ReplayLeakFlags{Fail: true}}, want{err: errNoLeakCheck}},
		{"--leak-check, nothing recorded", recording.Info{}, ReplayConfig{LeakConfig: pipeline.LeakConfig{LeakCheck: true, LeakCheckSet: true}},
			want{err: errNoLeakCheck}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			l, err := tt.c.leakSettings(tt.info)
			if tt.want.err != nil {
				if err == nil || (tt.want.err != errAny && !errors.Is(err, tt.want.err)) {
					t.Errorf("err = %v, want %v", err, tt.want.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var patterns []string
			for _, s := range l.Suppressions {
				patterns = append(patterns, s.Pattern)
			}
			got := want{check: l.LeakCheck, fail: l.FailOnLeak, failBytes: l.FailBytes, kinds: l.LeakKinds, patterns: patterns}
			if got.check != tt.want.check || got.fail != tt.want.fail || got.failBytes != tt.want.failBytes ||
				got.kinds != tt.want.kinds || !slices.Equal(got.patterns, tt.want.patterns) {
				t.Errorf("got %+v, want %+v", got, tt.want)
			}
		})
	}
}

var errAny = errors.New("any error")

func defaultPatterns() []string {
	var p []string
	for _, s := range leakcheck.DefaultSuppressions {
		p = append(p, s.Pattern)
	}
	return p
}

// TestRecordedLeakSettings: what a live run writes in the info is what a
// replay reads back as its defaults.
func TestRecordedLeakSettings(t *testing.T) {
	live := pipeline.LeakConfig{LeakCheck: true, FailOnLeak: true, FailBytes: 1024, LeakKinds: leakcheck.AllKinds,
		Suppressions:  append(leakcheck.Suppressions{{Pattern: "x", Source: "s:1", Kinds: leakcheck.AllKinds}}, leakcheck.DefaultSuppressions...),
		NoDefaultSupp: false}
	var info recording.Info
	live.RecordedLeakSettings(&info)
	l, err := (&ReplayConfig{}).leakSettings(info)
	if err != nil {
		t.Fatal(err)
	}
	if !l.LeakCheck || !l.FailOnLeak || l.FailBytes != 1024 || l.LeakKinds != leakcheck.AllKinds || len(l.Suppressions) != len(live.Suppressions) {
		t.Errorf("replay settings %+v, live %+v", l, live)
	}
}
