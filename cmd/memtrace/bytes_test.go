package main

import (
	"strings"
	"testing"
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
