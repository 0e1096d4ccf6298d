package main

import (
	"encoding/json"
	"math"
	"regexp"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/symbolize"
)

// TestResidentDetailStacks: with --detail, the rows of one function that
// made memory resident on two paths (fill, from from_a and from from_b)
// are told apart: in the text each row is followed by its callers, and
// each NDJSON resident record carries its stack.
func TestResidentDetailStacks(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "resident_stacks.c", "-fno-omit-frame-pointer")
	r := runMemtrace(t, "--json", "--detail", "--resident-bytes", residentSample, "--", bin)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	pid := finalPID(t, r.stdout)
	byPath := map[string]residentEstimate{}
	for l := range strings.Lines(r.stdout) {
		var rec residentStackRec
		if json.Unmarshal([]byte(l), &rec) != nil || rec.Type != "resident" || !rec.Final || rec.PID != pid {
			continue
		}
		if rec.Function == symbolize.ExecveFunction {
			// Pages the kernel's execve wrote into the new program's
			// stack (TestResidentExecve): a sample of those few pages
			// comes in about one run in ten.
			continue
		}
		if len(rec.Stack) == 0 || rec.Stack[0].Function != rec.Function || rec.Truncated == nil {
			t.Errorf("resident record without its stack: %s", l)
			continue
		}
		var path []string
		for _, f := range rec.Stack {
			path = append(path, f.Function)
		}
		k := strings.Join(path, " <- ")
		e := byPath[k]
		e.bytes += float64(rec.ResidentBytes)
		e.stderr = math.Hypot(e.stderr, float64(rec.ResidentBytesStderr))
		byPath[k] = e
	}
	t.Logf("resident by stack: %v", byPath)
	checkResident(t, byPath, map[string]float64{
		"fill <- from_a <- main": 32 << 20,
		"fill <- from_b <- main": 16 << 20,
	})

	// The text: each fill row is followed by its own callers.
	r = runMemtrace(t, "--detail", "--resident-bytes", residentSample, "--", bin)
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	section := r.stdout[strings.Index(r.stdout, "resident by who made it resident"):]
	for _, caller := range []string{"from_a", "from_b"} {
		row := regexp.MustCompile(`(?m)^ +[0-9.]+ MiB +[0-9.]+ KiB +[0-9]+  fill +\S*resident_stacks\.c:1[56] +\S+\n +<- ` +
			caller + `  \S*resident_stacks\.c:[0-9]+  \S+\n +<- main  `)
		if !row.MatchString(section) {
			t.Errorf("no fill row followed by %s <- main:\n%s", caller, section)
		}
	}
}
