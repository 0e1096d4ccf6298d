package session

import (
	"testing"
	"time"
)

func TestParseAt(t *testing.T) {
	tests := []struct {
		in   string
		want At
		bad  bool
	}{
		{in: "", want: At{}},
		{in: "12.5s", want: At{kind: "time", time: 12500 * time.Millisecond}},
		{in: "3", want: At{kind: "time", time: 3 * time.Second}},
		{in: "peak", want: At{kind: "peak"}},
		{in: "mark:loaded", want: At{kind: "mark", label: "loaded", nth: 1}},
		{in: "mark:a#b#3", want: At{kind: "mark", label: "a#b", nth: 3}},
		{in: "mark:x#0", bad: true},
		{in: "soon", bad: true},
	}
	for _, tc := range tests {
		got, err := ParseAt(tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("ParseAt(%q) = %+v, %v; want %+v (error: %v)", tc.in, got, err, tc.want, tc.bad)
		}
	}
}
