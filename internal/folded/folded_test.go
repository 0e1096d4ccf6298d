package folded

import (
	"bytes"
	"testing"

	"github.com/google/pprof/profile"

	"github.com/memtrace/memtrace/internal/pprofout"
)

// TestWrite: frames run outermost first, inlined functions are frames of
// their own, equal stacks are summed, zero values dropped; with several
// processes each stack starts at its process, exited ones folded by comm.
func TestWrite(t *testing.T) {
	main := &profile.Function{ID: 1, Name: "main"}
	outer := &profile.Function{ID: 2, Name: "outer"}
	helper := &profile.Function{ID: 3, Name: "std::vector<int; odd>::push"}
	m := &profile.Mapping{ID: 1, File: "/lib/libx.so", Start: 0x1000, Limit: 0x2000, Offset: 0}
	lMain := &profile.Location{ID: 1, Line: []profile.Line{{Function: main}}}
	lInl := &profile.Location{ID: 2, Line: []profile.Line{{Function: helper}, {Function: outer}}}
	lRaw := &profile.Location{ID: 3, Address: 0x1234, Mapping: m}
	sample := func(pid int64, v int64, locs ...*profile.Location) *profile.Sample {
		return &profile.Sample{Location: locs, Value: []int64{v, v, v, v},
			Label: map[string][]string{"comm": {"p"}}, NumLabel: map[string][]int64{"pid": {pid}}}
	}
	exited := func(v int64, locs ...*profile.Location) *profile.Sample {
		return &profile.Sample{Location: locs, Value: []int64{v, v, v, v},
			Label: map[string][]string{"comm": {"p"}, pprofout.ExitedLabel: {"true"}}, NumLabel: map[string][]int64{pprofout.ExitedCount: {3}}}
	}
	tests := []struct {
		name    string
		samples []*profile.Sample
		want    string
	}{
		{"one process", []*profile.Sample{
			sample(1, 5, lInl, lMain), sample(1, 7, lInl, lMain), sample(1, 0, lRaw), sample(1, 3, lRaw, lMain),
		}, "main;libx.so+0x234 3\nmain;outer;std::vector<int: odd>::push 12\n"},
		{"two processes", []*profile.Sample{sample(1, 5, lMain), sample(2, 6, lMain)},
			"p (1);main 5\np (2);main 6\n"},
		{"one live, exited ones", []*profile.Sample{sample(1, 5, lMain), exited(4, lMain)},
			"p (1);main 5\np (exited);main 4\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var buf bytes.Buffer
			if err := Write(&buf, &profile.Profile{Sample: tt.samples}, Live); err != nil {
				t.Fatal(err)
			}
			if buf.String() != tt.want {
				t.Errorf("got:\n%s\nwant:\n%s", buf.String(), tt.want)
			}
		})
	}
}

// TestHostileNames: names a process chose cannot break a folded line: a
// ";" would add a frame, a line break a line, trailing white space would
// shift where parsers split the value off; controls and invalid UTF-8
// are escaped.
func TestHostileNames(t *testing.T) {
	for _, tc := range []struct {
		name, comm, fn, want string
	}{
		{"semicolon", "p", "a;b", "p (1);a:b 5\n"},
		{"newline", "p", "a\nb\n", `p (1);a\nb\n 5` + "\n"},
		{"trailing space", "p ", "f  ", "p (1);f 5\n"},
		{"only spaces", "p", "   ", "p (1);[unknown] 5\n"},
		{"tab and cr", "p\t", "f\r\t", `p\t (1);f\r\t 5` + "\n"},
		{"escapes", "\x1b]0;x\x07", "\xff\u202e", `\x1b]0:x\x07 (1);\xff\u202e 5` + "\n"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := &profile.Function{ID: 1, Name: tc.fn}
			l := &profile.Location{ID: 1, Line: []profile.Line{{Function: f}}}
			sample := func(pid int64) *profile.Sample {
				return &profile.Sample{Location: []*profile.Location{l}, Value: []int64{5, 5, 5, 5},
					Label: map[string][]string{"comm": {tc.comm}}, NumLabel: map[string][]int64{"pid": {pid}}}
			}
			other := &profile.Sample{Location: []*profile.Location{l}, Value: []int64{0, 0, 0, 0},
				Label: map[string][]string{"comm": {"q"}}, NumLabel: map[string][]int64{"pid": {2}}}
			var buf bytes.Buffer
			if err := Write(&buf, &profile.Profile{Sample: []*profile.Sample{sample(1), other}}, Live); err != nil {
				t.Fatal(err)
			}
			if buf.String() != tc.want {
				t.Errorf("got %q, want %q", buf.String(), tc.want)
			}
		})
	}
}
