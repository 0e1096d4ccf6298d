package unwind

import (
	"slices"
	"testing"
)

// TestPLTThreshold checks the thresholds of the PLT rows GNU ld writes (the
// comments of KindPLT and of the BPF walk quote them): 11 for the lazy PLT,
// 9 for the IBT PLT, whose entries begin with endbr64.
func TestPLTThreshold(t *testing.T) {
	tests := []struct {
		name  string
		flags []string
		want  []int32
	}{
		{"lazy", []string{"-O2", "-Wl,-z,lazy"}, []int32{11}},
		{"ibt", []string{"-O2", "-fcf-protection=full", "-Wl,-z,ibtplt", "-Wl,-z,lazy"}, []int32{9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tab := buildFile(t, compile(t, "frames.c", tt.name, tt.flags...))
			var got []int32
			for _, r := range tab.Rows {
				if r.Kind == KindPLT && !slices.Contains(got, r.CFAOffset) {
					got = append(got, r.CFAOffset)
				}
			}
			if !slices.Equal(got, tt.want) {
				t.Errorf("PLT thresholds %v, want %v", got, tt.want)
			}
		})
	}
}
