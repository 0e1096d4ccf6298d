package main

import (
	"io"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/session"
)

// TestParseBytes: the one byte-count form of every flag that takes bytes.
func TestParseBytes(t *testing.T) {
	tests := []struct {
		in   string
		want uint64
		err  string // "" = valid
	}{
		{"0", 0, ""},
		{"65536", 65536, ""},
		{"64K", 64 << 10, ""},
		{"64k", 64 << 10, ""},
		{"64KiB", 64 << 10, ""},
		{"64kib", 64 << 10, ""},
		{"1M", 1 << 20, ""},
		{"1 MiB", 1 << 20, ""},
		{"2g", 2 << 30, ""},
		{"3GiB", 3 << 30, ""},
		{"512B", 512, ""},
		{" 7 ", 7, ""},
		{"18446744073709551615", 1<<64 - 1, ""},
		{"17179869184G", 0, "not a byte count"}, // 2^64: overflows
		{"", 0, "not a byte count"},
		{"K", 0, "not a byte count"},
		{"lots", 0, "not a byte count"},
		{"-1", 0, "not a byte count"},
		{"1.5M", 0, "not a byte count"},
		{"64KB", 0, "not a byte count"}, // decimal units are not taken for binary ones
		{"1T", 0, "not a byte count"},
	}
	for _, tt := range tests {
		got, err := parseBytes(tt.in)
		switch {
		case tt.err == "" && (err != nil || got != tt.want):
			t.Errorf("parseBytes(%q) = %d, %v; want %d", tt.in, got, err, tt.want)
		case tt.err != "" && (err == nil || !strings.Contains(err.Error(), tt.err)):
			t.Errorf("parseBytes(%q) = %d, %v; want an error saying %q", tt.in, got, err, tt.err)
		}
	}
}

// TestByteSizeMax: --sample-bytes has a ceiling; the other byte flags none.
func TestByteSizeMax(t *testing.T) {
	var n uint64
	var set bool
	if err := (byteSize{&n, &set, 1 << 20}).Set("2M"); err == nil || !strings.Contains(err.Error(), "at most 1048576 bytes") {
		t.Errorf("2M over a 1 MiB ceiling: %v", err)
	}
	if err := (byteSize{&n, &set, 0}).Set("2G"); err != nil || n != 2<<30 || !set {
		t.Errorf("2G without a ceiling: %d, %v, %v", n, set, err)
	}
}

// TestByteFlags: every flag that takes bytes reads them with parseBytes.
func TestByteFlags(t *testing.T) {
	tests := []struct {
		args []string
		got  func(c *session.Config) uint64
		want uint64
	}{
		{[]string{"--sample-bytes", "64k"}, func(c *session.Config) uint64 { return c.SampleBytes }, 64 << 10},
		{[]string{"--ring-size", "8MiB"}, func(c *session.Config) uint64 { return uint64(c.RingBytes) }, 8 << 20},
		{[]string{"--peak-tolerance", "2 KiB"}, func(c *session.Config) uint64 { return c.PeakTol.Bytes }, 2 << 10},
		{[]string{"--fail-on-leak=1g"}, func(c *session.Config) uint64 { return c.FailBytes }, 1 << 30},
	}
	for _, tt := range tests {
		c, err := parseFlags(append(tt.args, "--", "true"), io.Discard)
		if err != nil {
			t.Errorf("%v: %v", tt.args, err)
			continue
		}
		if got := tt.got(c); got != tt.want {
			t.Errorf("%v: %d, want %d", tt.args, got, tt.want)
		}
	}
	var code int
	diff := diffCommand(&code, io.Discard, io.Discard)
	if err := diff.Flags().Parse([]string{"--fail-on-growth", "3M"}); err != nil {
		t.Fatal(err)
	}
	if v := diff.Flags().Lookup("fail-on-growth").Value.String(); v != "3M" {
		t.Errorf("memtrace diff --fail-on-growth 3M: %s, want 3M", v)
	}
	if _, err := parseFlags([]string{"--ring-size", "4G", "--", "true"}, io.Discard); err == nil || !strings.Contains(err.Error(), "at most 2147483648 bytes") {
		t.Errorf("--ring-size 4G: %v, want a usage error", err)
	}
}

// TestFormatBytes: a default shown by --help reads back as the same count.
func TestFormatBytes(t *testing.T) {
	tests := []struct {
		n    uint64
		want string
	}{
		{0, "0"}, {1000, "1000"}, {4096, "4K"}, {65536, "64K"}, {1536 << 10, "1536K"},
		{64 << 20, "64M"}, {3 << 30, "3G"}, {1<<30 + 1, "1073741825"},
	}
	for _, tc := range tests {
		got := formatBytes(tc.n)
		if got != tc.want {
			t.Errorf("formatBytes(%d) = %q, want %q", tc.n, got, tc.want)
		}
		if back, err := parseBytes(got); err != nil || back != tc.n {
			t.Errorf("parseBytes(%q) = %d, %v; want %d", got, back, err, tc.n)
		}
	}
}

// TestRingSizeForMode: the ring's default follows the mode (its pages
// are memtrace's resident memory); --ring-size overrides it.
func TestRingSizeForMode(t *testing.T) {
	for _, tt := range []struct {
		args []string
		want int
	}{
		{[]string{"--", "true"}, targetRingBytes},
		{[]string{"-p", "1"}, targetRingBytes},
		{[]string{"--detail", "--", "true"}, 64 << 20},
		{[]string{"--record", "r", "--", "true"}, 64 << 20},
		{[]string{"--html", "r.html", "--", "true"}, 64 << 20},
		{[]string{"--sample-bytes", "64k", "--", "true"}, sampledRingBytes},
		{[]string{"--heap", "--sample-bytes", "0"}, 64 << 20},
		{[]string{"--heap"}, sampledRingBytes},
		{nil, sampledRingBytes},
		{[]string{"--ring-size", "128MiB", "--", "true"}, 128 << 20},
	} {
		c, err := parseFlags(tt.args, io.Discard)
		if err != nil {
			t.Errorf("%v: %v", tt.args, err)
			continue
		}
		if c.RingBytes != tt.want {
			t.Errorf("%v: ring %d bytes, want %d", tt.args, c.RingBytes, tt.want)
		}
	}
}
