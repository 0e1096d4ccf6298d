package report

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/aggregate"
)

// sampledSnapshot is periodicSnapshot as a sampled run would report it.
func sampledSnapshot() aggregate.Snapshot {
	s := periodicSnapshot()
	s.SampleBytes = 512 * KiB
	for i := range s.Processes {
		p := &s.Processes[i]
		p.SampleBytes, p.LiveBytesStderr, p.CountsExact = s.SampleBytes, 123456.4, true
		for j := range p.Sites {
			if p.Sites[j].Category == aggregate.Heap {
				p.Sites[j].LiveBytesStderr = 1000.6
			}
		}
	}
	return s
}

// TestHostJSONLayout: the whole-host layout is the report line, the
// process lines, then every process's heap sites ranked together, then
// mmap sites, each with its pid and comm.
func TestHostJSONLayout(t *testing.T) {
	lines := jsonLines(t, sampledSnapshot(), fixtureSymbols, Options{Top: 3, Host: true})
	var types, order []string
	for _, l := range lines {
		m := decodeLine(t, l)
		typ := m["type"].(string)
		types = append(types, typ)
		if got := objectKeys(t, []byte(l)); !slices.Equal(got, jsonFields[typ]) {
			t.Errorf("%s fields %v, want %v", typ, got, jsonFields[typ])
		}
		switch typ {
		case "report":
			if m["host"] != true || m["sampled"] != true || m["sample_bytes"].(interface{ String() string }).String() != "524288" {
				t.Errorf("report line %s", l)
			}
		case "callsite":
			order = append(order, m["category"].(string)+":"+m["comm"].(string)+":"+m["address"].(string))
			if m["category"] == "heap" && (m["sampled"] != true || m["live_bytes_stderr"].(interface{ String() string }).String() != "1001") {
				t.Errorf("heap site not marked sampled: %s", l)
			}
			if m["category"] == "mmap" && m["sampled"] != false {
				t.Errorf("mmap site marked sampled: %s", l)
			}
		case "process":
			if m["sampled"] != true || m["live_bytes_stderr"].(interface{ String() string }).String() != "123456" {
				t.Errorf("process not marked sampled: %s", l)
			}
		}
	}
	wantTypes := []string{"report", "process", "process", "callsite", "callsite", "callsite", "callsite"}
	if !slices.Equal(types, wantTypes) {
		t.Errorf("types %v, want %v", types, wantTypes)
	}
	// Heap sites of both processes by live bytes, cut to 3; then the one mmap site.
	wantOrder := []string{"heap:worker:0x7f3a00001234", "heap:myserver:0x401a2b", "heap:worker:0x401a2b", "mmap:worker:0x402200"}
	if !slices.Equal(order, wantOrder) {
		t.Errorf("site order %v, want %v", order, wantOrder)
	}
}

// TestHostExitedListsAll: a report of exited processes lists them all,
// whatever Top says.
func TestHostExitedListsAll(t *testing.T) {
	lines := jsonLines(t, periodicSnapshot(), fixtureSymbols, Options{Top: 1, Host: true, Exited: true, Final: true})
	procs := 0
	for _, l := range lines {
		if strings.Contains(l, `"type":"process"`) {
			procs++
		}
	}
	if procs != 2 {
		t.Errorf("%d process lines, want 2:\n%s", procs, strings.Join(lines, "\n"))
	}
}

// TestSampledText: estimates are marked, with their standard errors.
func TestSampledText(t *testing.T) {
	for _, o := range []Options{{Top: DefaultTop}, {Top: DefaultTop, Host: true}} {
		var b bytes.Buffer
		if err := WriteText(&b, sampledSnapshot(), fixtureSymbols, o); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		for _, want := range []string{"sampled: 1 sample per 512.0 KiB allocated on average", "~LIVE", "± LIVE", "~BLOCKS", "1001 B"} {
			if !strings.Contains(out, want) {
				t.Errorf("host=%v: output lacks %q:\n%s", o.Host, want, out)
			}
		}
		if o.Host && !strings.Contains(out, "heap call sites across the host by live bytes (all 5):") {
			t.Errorf("no host-wide site table:\n%s", out)
		}
		if !o.Host && !strings.Contains(out, "live:        ~2.0 MiB ± 120.6 KiB in ~12 blocks") {
			t.Errorf("process header not marked:\n%s", out)
		}
	}
}
