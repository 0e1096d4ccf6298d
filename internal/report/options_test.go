package report

import (
	"strings"
	"testing"
)

func TestParseSortKey(t *testing.T) {
	tests := []struct {
		in      string
		want    SortKey
		wantErr bool
	}{
		{"", SortLive, false},
		{"live", SortLive, false},
		{"allocated", SortAllocated, false},
		{"allocs", SortAllocs, false},
		{"Live", "", true},
		{"alloc_bytes", "", true},
		{"size", "", true},
	}
	for _, tt := range tests {
		got, err := ParseSortKey(tt.in)
		if (err != nil) != tt.wantErr || got != tt.want {
			t.Errorf("ParseSortKey(%q) = %q, %v; want %q, error %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err != nil {
			for _, k := range []string{"live", "allocated", "allocs"} {
				if !strings.Contains(err.Error(), k) {
					t.Errorf("ParseSortKey(%q) error %q does not list %q", tt.in, err, k)
				}
			}
		}
	}
}

func TestOptionsNormalized(t *testing.T) {
	tests := []struct {
		in      Options
		want    Options
		wantErr string
	}{
		{in: Options{}, want: Options{Sort: SortLive}},
		{in: Options{Top: 3, Sort: SortAllocs, Final: true, Raw: true},
			want: Options{Top: 3, Sort: SortAllocs, Final: true, Raw: true}},
		{in: Options{Top: -1}, wantErr: "invalid top -1"},
		{in: Options{Sort: "bogus"}, wantErr: `unknown sort key "bogus"`},
	}
	for _, tt := range tests {
		got, err := tt.in.normalized()
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%+v.normalized() error = %v, want %q", tt.in, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want {
			t.Errorf("%+v.normalized() = %+v, %v; want %+v", tt.in, got, err, tt.want)
		}
	}
}
