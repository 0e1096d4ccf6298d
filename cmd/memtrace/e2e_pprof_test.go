package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// phaseFigures are testdata/exports_phases.c's heap figures per function:
// allocations, bytes allocated, live blocks, live bytes at the end.
var phaseFigures = map[string][4]int64{
	"grow":   {100, 1000000, 100, 1000000},
	"spike":  {40, 2000000, 0, 0},
	"settle": {10, 40960, 10, 40960},
}

// TestPprof: --pprof writes Go's heap sample types with exact figures per
// function, read back by the pprof library and by go tool pprof -top; the
// mapping carries the fixture's path and build-id, the location its line.
func TestPprof(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "exports_phases.c")
	lines := siteLines(t, "exports_phases.c")
	out := filepath.Join(t.TempDir(), "heap.pb.gz")
	r := runMemtrace(t, "--pprof", out, "--", bin)
	if r.code != 0 {
		t.Fatalf("exit %d: %s", r.code, r.stderr)
	}
	p := readProfile(t, out)
	var types []string
	for _, st := range p.SampleType {
		types = append(types, st.Type+"/"+st.Unit)
	}
	if got, want := strings.Join(types, " "), "alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes resident_space/bytes"; got != want {
		t.Errorf("sample types %q, want %q", got, want)
	}
	got := map[string][4]int64{}
	for _, s := range p.Sample {
		if s.Value[4] != 0 {
			continue // resident_space: who made memory resident (e2e_resident_test.go)
		}
		if len(s.Location) != 1 || len(s.Location[0].Line) != 1 {
			t.Fatalf("want one frame per sample without --detail: %v", s)
		}
		l := s.Location[0]
		fn := l.Line[0].Function.Name
		if _, ok := phaseFigures[fn]; !ok {
			continue // the C runtime's own allocations, if any
		}
		if l.Line[0].Line != int64(lines[fn]) {
			t.Errorf("%s: line %d, want %d", fn, l.Line[0].Line, lines[fn])
		}
		if l.Mapping == nil || l.Mapping.File != bin || l.Mapping.BuildID != buildIDOf(t, bin) {
			t.Errorf("%s: mapping %+v, want file %s build-id %s", fn, l.Mapping, bin, buildIDOf(t, bin))
		}
		addValues(got, fn, s.Value)
	}
	for fn, want := range phaseFigures {
		if got[fn] != want {
			t.Errorf("%s: %v, want %v", fn, got[fn], want)
		}
	}

	// go tool pprof reads it too, with the same figures.
	for i, index := range []string{"alloc_objects", "alloc_space", "inuse_objects", "inuse_space"} {
		args := []string{"tool", "pprof", "-top", "-sample_index=" + index, "-unit=byte", out}
		if strings.HasSuffix(index, "objects") {
			args = []string{"tool", "pprof", "-top", "-sample_index=" + index, out}
		}
		b, err := exec.Command("go", args...).Output()
		if err != nil {
			t.Fatalf("go %v: %v", args, err)
		}
		flat := topFlat(string(b))
		for fn, want := range phaseFigures {
			if want[i] == 0 {
				continue // pprof leaves zero rows out
			}
			w := strconv.FormatInt(want[i], 10)
			if !strings.HasSuffix(index, "objects") {
				w += "B"
			}
			if flat[fn] != w {
				t.Errorf("pprof -top %s: %s flat %q, want %q\n%s", index, fn, flat[fn], w, b)
			}
		}
	}
}

// TestFolded: --folded writes one line per stack with the chosen value;
// with --detail the stack runs from main to the call site.
func TestFolded(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "exports_phases.c", "-fno-omit-frame-pointer")
	tests := []struct {
		value  string
		detail bool
		want   []string
	}{
		{"live", false, []string{"grow 1000000", "settle 40960"}},
		{"allocated", false, []string{"grow 1000000", "settle 40960", "spike 2000000"}},
		{"allocs", true, []string{"main;grow 100", "main;settle 10", "main;spike 40"}},
	}
	for _, tt := range tests {
		t.Run(tt.value, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "stacks.folded")
			args := []string{"--folded", out, "--folded-value", tt.value}
			if tt.detail {
				args = append(args, "--detail")
			}
			r := runMemtrace(t, append(args, "--", bin)...)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, l := range strings.Split(strings.TrimSpace(string(b)), "\n") {
				for fn := range phaseFigures {
					if strings.Contains(l, fn+" ") {
						got = append(got, l)
					}
				}
			}
			if strings.Join(got, "\n") != strings.Join(tt.want, "\n") {
				t.Errorf("folded:\n%s\nwant lines:\n%s", b, strings.Join(tt.want, "\n"))
			}
		})
	}
}

// topFlat maps function -> flat column of go tool pprof -top's rows.
func topFlat(out string) map[string]string {
	m := map[string]string{}
	for _, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) == 6 && strings.HasSuffix(f[1], "%") {
			m[f[5]] = f[0]
		}
	}
	return m
}
