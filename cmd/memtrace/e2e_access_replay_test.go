package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestAccessReplay: a recording of testdata/access.c with --access
// replays to the live run's output, access records and "memory by
// access" section included, in NDJSON and in text; a diff of the two
// recordings compares the sites' access figures.
func TestAccessReplay(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "access.c")
	dir := t.TempDir()
	recs := map[string]string{}
	for _, format := range []string{"json", "text"} {
		t.Run(format, func(t *testing.T) {
			rec := filepath.Join(dir, format+".rec")
			out := filepath.Join(dir, format+".out")
			res := runMemtrace(t, "--access=200ms", "--mark=loop_done", "--record", rec, "-o", out,
				"--json="+boolFlag(format == "json"), "--", bin, "1500")
			if res.code != 0 {
				t.Fatalf("exit %d\n%s", res.code, res.stderr)
			}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatal(err)
			}
			live := string(b)
			if format == "json" {
				sites := map[string]bool{}
				for _, r := range parseAccess(t, live) {
					sites[r.Type+" "+r.Function] = true
				}
				for _, want := range []string{"access_process ", "access hot_block", "access never_block", "access_block never_block"} {
					if !sites[want] {
						t.Errorf("the live run wrote no %s record:\n%s", want, live)
					}
				}
			} else if !strings.Contains(live, "memory by access") || !strings.Contains(live, "once_block") {
				t.Errorf("the live run printed no access section:\n%s", live)
			}
			r := replayIn(t, format, rec)
			sameOutput(t, format, r.stdout, live)
			recs[format] = rec
		})
	}
	if len(recs) != 2 {
		return
	}
	for _, format := range []string{"json", "text"} {
		args := []string{"diff", recs["json"], recs["text"]}
		if format == "json" {
			args = append(args, "--json")
		}
		d := runMemtrace(t, args...)
		if d.code != 0 {
			t.Fatalf("diff: exit %d\n%s", d.code, d.stderr)
		}
		for _, fn := range []string{"hot_block", "once_block", "never_block"} {
			want := "cold " // a text row
			if format == "json" {
				want = `{"type":"access_diff"`
			}
			if !lineWithAll(d.stdout, want, fn) {
				t.Errorf("diff --json=%v shows no access row of %s:\n%s", format == "json", fn, d.stdout)
			}
		}
	}
}

// lineWithAll reports whether a line of out holds every one of parts.
func lineWithAll(out string, parts ...string) bool {
	for l := range strings.Lines(out) {
		all := true
		for _, p := range parts {
			all = all && strings.Contains(l, p)
		}
		if all {
			return true
		}
	}
	return false
}
