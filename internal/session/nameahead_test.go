package session

import (
	"slices"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/tracer"
)

// TestNamingDue: a target is named ahead once, nameAheadAfter past its
// attach; again only after an exec attaches it anew; never before its
// probes are on, nor after its exit (its exit stop names it then).
func TestNamingDue(t *testing.T) {
	at := time.Unix(1000, 0)
	s := &session{targets: map[int]*target{
		1: {pid: 1, attached: at},
		2: {pid: 2, attached: at.Add(150 * time.Millisecond)},
		3: {pid: 3},
		4: {pid: 4, attached: at, exited: true},
	}}
	steps := []struct {
		after time.Duration
		want  []int
	}{
		{nameAheadAfter - time.Millisecond, nil},
		{nameAheadAfter, []int{1}},
		{nameAheadAfter + 150*time.Millisecond, []int{2}},
		{time.Hour, nil},
	}
	for _, st := range steps {
		got := s.namingDue(at.Add(st.after))
		slices.Sort(got)
		if !slices.Equal(got, st.want) {
			t.Errorf("at +%v: named %v, want %v", st.after, got, st.want)
		}
	}
	// An exec attaches its new program: named once more.
	s.targets[1].attached, s.targets[1].namedAhead = at.Add(time.Hour), false
	if got := s.namingDue(at.Add(time.Hour + nameAheadAfter)); !slices.Equal(got, []int{1}) {
		t.Errorf("after an exec: named %v, want [1]", got)
	}
}

// TestNamingWaitsForTables: a target whose unwind tables are still being
// built is named once they are in, or at nameAheadTablesBound past its
// attach if they never come.
func TestNamingWaitsForTables(t *testing.T) {
	at := time.Unix(1000, 0)
	building, never := make(chan struct{}), make(chan struct{})
	s := &session{targets: map[int]*target{
		1: {pid: 1, attached: at, tables: tracer.Preload{All: building}},
		2: {pid: 2, attached: at, tables: tracer.Preload{All: never}},
	}}
	if got := s.namingDue(at.Add(nameAheadAfter)); got != nil {
		t.Errorf("tables being built: named %v, want none", got)
	}
	close(building)
	if got := s.namingDue(at.Add(nameAheadAfter + time.Millisecond)); !slices.Equal(got, []int{1}) {
		t.Errorf("tables in: named %v, want [1]", got)
	}
	if got := s.namingDue(at.Add(nameAheadTablesBound)); !slices.Equal(got, []int{2}) {
		t.Errorf("at the bound: named %v, want [2]", got)
	}
}
