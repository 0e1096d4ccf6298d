package main

import (
	"os/exec"
	"slices"
	"testing"
)

// TestDetailStacks: --detail prints main -> outer -> inner for a fixture
// built with frame pointers and for one built without (unwound from its
// .eh_frame), and marks the stack truncated (never guessing frames) when
// the code has neither frame pointers nor unwind tables.
func TestDetailStacks(t *testing.T) {
	needBPF(t)
	lines := siteLines(t, "stacks.c")
	tests := []struct {
		name      string
		flags     []string
		want      []string // functions, innermost first
		truncated bool
	}{
		{"frame pointers", []string{"-fno-omit-frame-pointer"}, []string{"inner", "outer", "main"}, false},
		{"no frame pointers", []string{"-fomit-frame-pointer"}, []string{"inner", "outer", "main"}, false},
		// (and without .debug_frame: see below)
		{"no frame pointers, no unwind tables", []string{"-fomit-frame-pointer", "-fno-asynchronous-unwind-tables", "-fno-unwind-tables"}, []string{"inner"}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			bin := fixture(t, "stacks.c", tt.flags...)
			if slices.Contains(tt.flags, "-fno-unwind-tables") {
				// -g still writes .debug_frame, which memtrace reads too.
				stripped := bin + "-nodebugframe"
				if out, err := exec.Command("objcopy", "--remove-section=.debug_frame", bin, stripped).CombinedOutput(); err != nil {
					t.Fatalf("objcopy: %v: %s", err, out)
				}
				bin = stripped
			}
			r := runMemtrace(t, "--json", "--detail", "--top", "0", "--", bin)
			if r.code != 0 {
				t.Fatalf("exit %d: %s", r.code, r.stderr)
			}
			rep := parseNDJSON(t, r.stdout)
			var site *siteRecord
			for i, s := range rep.sites {
				if s.Function == "inner" {
					if site != nil {
						t.Fatalf("two stacks for inner: %+v and %+v", *site, s)
					}
					site = &rep.sites[i]
				}
			}
			if site == nil {
				t.Fatalf("no call site in inner: %+v", rep.sites)
			}
			if site.Allocs != 3 || site.LiveBytes != 72 {
				t.Errorf("inner: %d allocs, %d live bytes, want 3 and 72", site.Allocs, site.LiveBytes)
			}
			if site.StackTruncated == nil || *site.StackTruncated != tt.truncated {
				t.Errorf("stack_truncated = %v, want %v", site.StackTruncated, tt.truncated)
			}
			if len(site.Stack) != len(tt.want) {
				t.Fatalf("stack %+v, want %v", site.Stack, tt.want)
			}
			for i, fn := range tt.want {
				if site.Stack[i].Function != fn {
					t.Errorf("frame %d: %s, want %s (stack %+v)", i, site.Stack[i].Function, fn, site.Stack)
				}
				if l, ok := lines[fn]; ok && site.Stack[i].Line != l {
					t.Errorf("frame %d (%s): line %d, want %d", i, fn, site.Stack[i].Line, l)
				}
			}
		})
	}
}
