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
			// The text run's pages turn cold later: its diff with the
			// other shows once_block's cold bytes changed.
			coldAfter := map[string]string{"json": "3", "text": "100"}[format]
			res := runMemtrace(t, "--access=200ms", "--cold-after", coldAfter, "--mark=loop_done", "--record", rec, "-o", out,
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
		// NDJSON has every site; the text, the sites that changed. Only
		// cold bytes are sure to differ (touched bytes in the last, short
		// epoch depend on when the mark was read).
		want := map[string][][]string{
			"json": {{`{"type":"access_process_diff","comm":"access-","live_bytes":159744,"live_bytes_delta":0,`, `"cold_bytes":0,"cold_bytes_delta":-24576,"never_touched_bytes":81920,"never_touched_bytes_delta":0}`},
				{`{"type":"access_diff","comm":"access-","category":"heap","function":"once_block","file":"../../testdata/access.c","line":35,"module":"access-","offset":"","live_bytes":24576,"live_bytes_delta":0,`, `"cold_bytes":0,"cold_bytes_delta":-24576,"never_touched_bytes":0,"never_touched_bytes_delta":0}`},
				{`{"type":"access_diff"`, `"function":"hot_block"`, `"cold_bytes":0,"cold_bytes_delta":0`},
				{`{"type":"access_diff"`, `"function":"never_block"`, `"never_touched_bytes":81920,"never_touched_bytes_delta":0}`}},
			"text": {{"  access:    live 156.0 KiB (+0 B), touched ", ", cold 0 B (-24.0 KiB), never touched 80.0 KiB (+0 B) (latest epochs)"},
				{"    cold 0 B (-24.0 KiB), touched ", ", never touched 0 B (+0 B), live 24.0 KiB (+0 B)  once_block  ../../testdata/access.c:35  access-"}},
		}[format]
		for _, w := range want {
			if !lineWithAll(d.stdout, w...) {
				t.Errorf("diff --json=%v has no line with %q:\n%s", format == "json", w, d.stdout)
			}
		}
		if format == "text" && strings.Contains(d.stdout, "hot_block") {
			t.Errorf("diff shows hot_block, whose figures did not change:\n%s", d.stdout)
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
