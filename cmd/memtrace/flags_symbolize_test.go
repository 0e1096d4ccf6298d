package main

import (
	"testing"
	"time"
)

func TestDebuginfodWaitFlag(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want time.Duration
		bad  bool
	}{
		{in: "30s", want: 30 * time.Second},
		{in: "0", want: 0},
		{in: "1m30s", want: 90 * time.Second},
		{in: "-1s", bad: true},
		{in: "soon", bad: true},
	} {
		var got time.Duration
		err := waitFlag{&got}.Set(tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("Set(%q) = %v, %v; want %v (error: %v)", tc.in, got, err, tc.want, tc.bad)
		}
	}
	for _, args := range [][]string{{"--debuginfod-wait", "-1s", "--", "true"}, {"replay", "--debuginfod-wait", "x", "f"}} {
		if code := run(args, nil, nil, discard{}); code != exitUsage {
			t.Errorf("memtrace %q: exit %d, want %d", args, code, exitUsage)
		}
	}
}
