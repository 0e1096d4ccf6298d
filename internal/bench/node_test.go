package bench

import "testing"

// TestNodeTarget: the allowed wall time is the untraced median plus the
// calls times the floor plus 0.3 s, and each memtrace row is held to it.
func TestNodeTarget(t *testing.T) {
	tests := []struct {
		name       string
		cached     float64
		wantMet    bool
		wantRows   int
		noFloor    bool
		wantAllow  float64
		wantTarget string
	}{
		// 0.1 s + 100 000 calls x 2 us + 0.3 s = 0.6 s
		{name: "met", cached: 0.55, wantMet: true, wantRows: 6, wantAllow: 0.6, wantTarget: "<= 0.600 s"},
		{name: "missed", cached: 0.65, wantMet: false, wantRows: 6, wantAllow: 0.6, wantTarget: "<= 0.600 s"},
		{name: "no floor", cached: 0.55, noFloor: true, wantRows: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			wall := &Comparison{}
			for name, v := range map[string]float64{rowUntraced: 0.1, rowMemtraceCached: tt.cached, rowMemtraceFirst: 0.9, rowHeaptrack: 0.4} {
				r := wall.add(name)
				r.record(v, nil)
				r.summarize()
			}
			c := &Comparison{}
			c.add(rowNodeCalls).record(100_000, nil)
			floor := c.add(rowNodeFloor)
			if !tt.noFloor {
				floor.record(2, nil)
			}
			nodeTarget(c, wall)
			if len(c.Rows) != tt.wantRows {
				t.Fatalf("%d rows, want %d: %+v", len(c.Rows), tt.wantRows, c.Rows)
			}
			if tt.noFloor {
				return
			}
			if a := c.row(rowNodeAllowed); a == nil || a.Median < tt.wantAllow-1e-9 || a.Median > tt.wantAllow+1e-9 {
				t.Errorf("allowed row %+v, want %v s", a, tt.wantAllow)
			}
			r := c.row(rowMemtraceCached + ", wall (s)")
			if r == nil || r.Met == nil || *r.Met != tt.wantMet || r.Target != tt.wantTarget {
				t.Errorf("cached row %+v, want met %v, target %q", r, tt.wantMet, tt.wantTarget)
			}
			if r := c.row(rowMemtraceFirst + ", wall (s)"); r == nil || r.Met == nil || *r.Met {
				t.Errorf("first-run row %+v, want missed (0.9 s > 0.6 s)", r)
			}
		})
	}
}
