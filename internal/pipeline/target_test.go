package pipeline

import "testing"

// TestModeAndTitle: a run's mode and title, for each kind of target.
func TestModeAndTitle(t *testing.T) {
	for _, c := range []struct {
		pids        []int
		command     []string
		mode, title string
	}{
		{nil, []string{"./prog", "-x"}, "command", "memtrace ./prog -x"},
		{[]int{12, 34}, nil, "pid", "memtrace -p 12 -p 34"},
		{nil, nil, "host", "memtrace (whole host)"},
	} {
		if m, ti := Mode(c.pids, c.command), Title(c.pids, c.command); m != c.mode || ti != c.title {
			t.Errorf("%v %v: mode %q title %q, want %q %q", c.pids, c.command, m, ti, c.mode, c.title)
		}
	}
}
