package report

import "testing"

func TestHumanBytes(t *testing.T) {
	tests := []struct {
		in   uint64
		want string
	}{
		{0, "0 B"},
		{1, "1 B"},
		{1023, "1023 B"},
		{1024, "1.0 KiB"},
		{1536, "1.5 KiB"},
		{1075, "1.0 KiB"}, // 1.0498 rounds down
		{1076, "1.1 KiB"}, // 1.0508 rounds up
		{10 * KiB, "10.0 KiB"},
		{1*MiB - 52, "1023.9 KiB"},
		{1*MiB - 51, "1.0 MiB"}, // would print 1024.0 KiB
		{1 * MiB, "1.0 MiB"},
		{1*MiB + 512*KiB, "1.5 MiB"},
		{1 << 30, "1.0 GiB"},
		{5 << 40, "5.0 TiB"},
		{1 << 50, "1.0 PiB"},
		{1 << 60, "1.0 EiB"},
		{^uint64(0), "16.0 EiB"},
	}
	for _, tt := range tests {
		if got := humanBytes(tt.in); got != tt.want {
			t.Errorf("humanBytes(%d) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestByteCellAndText(t *testing.T) {
	tests := []struct {
		in        uint64
		raw       bool
		cell, txt string
	}{
		{1536, false, "1.5 KiB", "1.5 KiB"},
		{1536, true, "1536", "1536 B"},
		{0, true, "0", "0 B"},
	}
	for _, tt := range tests {
		if got := byteCell(tt.in, tt.raw); got != tt.cell {
			t.Errorf("byteCell(%d, %v) = %q, want %q", tt.in, tt.raw, got, tt.cell)
		}
		if got := byteText(tt.in, tt.raw); got != tt.txt {
			t.Errorf("byteText(%d, %v) = %q, want %q", tt.in, tt.raw, got, tt.txt)
		}
	}
}

func TestMonotonicSeconds(t *testing.T) {
	tests := []struct {
		ns   uint64
		want string
	}{
		{0, "0.000s"},
		{999_999, "0.000s"},
		{1_000_000, "0.001s"},
		{5_123_456_789_012, "5123.456s"},
		{60_050_000_000, "60.050s"},
	}
	for _, tt := range tests {
		if got := monotonicSeconds(tt.ns); got != tt.want {
			t.Errorf("monotonicSeconds(%d) = %q, want %q", tt.ns, got, tt.want)
		}
	}
}
