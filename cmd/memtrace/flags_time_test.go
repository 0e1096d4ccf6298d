package main

import (
	"testing"
	"time"

	"github.com/memtrace/memtrace/aggregate"
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

func TestParseAt(t *testing.T) {
	tests := []struct {
		in   string
		want atSpec
		bad  bool
	}{
		{in: "", want: atSpec{}},
		{in: "12.5s", want: atSpec{kind: "time", time: 12500 * time.Millisecond}},
		{in: "3", want: atSpec{kind: "time", time: 3 * time.Second}},
		{in: "peak", want: atSpec{kind: "peak"}},
		{in: "mark:loaded", want: atSpec{kind: "mark", label: "loaded", nth: 1}},
		{in: "mark:a#b#3", want: atSpec{kind: "mark", label: "a#b", nth: 3}},
		{in: "mark:x#0", bad: true},
		{in: "soon", bad: true},
	}
	for _, tc := range tests {
		got, err := parseAt(tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("parseAt(%q) = %+v, %v; want %+v (error: %v)", tc.in, got, err, tc.want, tc.bad)
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
