package main

import (
	"testing"

	"github.com/memtrace/memtrace/internal/aggregate"
)

func TestPeakToleranceFlag(t *testing.T) {
	tests := []struct {
		in   string
		want aggregate.PeakTolerance
		bad  bool
	}{
		{in: "1%", want: aggregate.PeakTolerance{PPM: 10000}},
		{in: "0.5%", want: aggregate.PeakTolerance{PPM: 5000}},
		{in: "0", want: aggregate.PeakTolerance{}},
		{in: "64K", want: aggregate.PeakTolerance{Bytes: 65536}},
		{in: "1MiB", want: aggregate.PeakTolerance{Bytes: 1 << 20}},
		{in: "101%", bad: true},
		{in: "lots", bad: true},
	}
	for _, tc := range tests {
		var got aggregate.PeakTolerance
		err := peakTolerance{&got}.Set(tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("Set(%q) = %+v, %v; want %+v (error: %v)", tc.in, got, err, tc.want, tc.bad)
		}
	}
}

func TestReplayUsage(t *testing.T) {
	for _, args := range [][]string{{"replay"}, {"replay", "a", "b"}, {"diff", "a"}, {"replay", "--at", "soon", "f"}} {
		if code := run(args, nil, nil, discard{}); code != exitUsage {
			t.Errorf("memtrace %q: exit %d, want %d", args, code, exitUsage)
		}
	}
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
