package report

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/access"
	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/symbolize"
)

// TestWriteAccess: the access records carry exactly the contract's
// fields (docs/json.md), written_bytes null when the method cannot tell.
func TestWriteAccess(t *testing.T) {
	site := aggregate.SiteKey{Address: 0x401000, StackID: -1}
	sym := fakeSymbolizer{0x401000: {Function: "make_cache", File: "cache.c", Line: 12, Module: "app"}}
	f := access.Figures{Live: 1 << 20, Touched: 4096, Cold: 8192, NeverTouched: 12288, LastAccessAgeNS: 7}
	e := access.Epoch{Number: 3, StartNS: 1000, EndNS: 5000, Method: "pagemap+pte-walk", Process: f,
		Sites:  []access.SiteFigures{{Site: site, Category: aggregate.Heap, Figures: f}},
		Blocks: []access.BlockFigures{{Addr: 0x7f0000000000, Site: site, Category: aggregate.Heap, Figures: f}}}
	var b bytes.Buffer
	if err := WriteAccess(&b, 42, "app", e, sym, true); err != nil {
		t.Fatal(err)
	}
	common := []string{"live_bytes", "touched_bytes", "written_bytes", "cold_bytes", "never_touched_bytes",
		"last_access_age_ns", "epoch", "epoch_ns", "method", "final", "time_ns"}
	siteKeys := []string{"category", "function", "file", "line", "module", "address"}
	want := map[string][]string{
		"access_process": append([]string{"type", "pid", "comm"}, common...),
		"access":         append(append([]string{"type", "pid", "comm"}, siteKeys...), common...),
		"access_block":   append(append(append([]string{"type", "pid", "comm"}, siteKeys...), "block_address", "size_bytes"), common...),
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d records:\n%s", len(lines), b.String())
	}
	for _, l := range lines {
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatal(err)
		}
		typ := m["type"].(string)
		var keys []string
		for k := range m {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		w := slices.Clone(want[typ])
		slices.Sort(w)
		if !slices.Equal(keys, w) {
			t.Errorf("%s: fields %v, want %v", typ, keys, w)
		}
		if m["written_bytes"] != nil || m["epoch_ns"] != 4000.0 || m["time_ns"] != 5000.0 || m["final"] != true {
			t.Errorf("%s: %s", typ, l)
		}
		if typ != "access_process" && (m["function"] != "make_cache" || m["address"] != "0x401000") {
			t.Errorf("%s: site %s", typ, l)
		}
	}
	if !strings.Contains(lines[2], `"block_address":"0x7f0000000000","size_bytes":1048576`) {
		t.Errorf("block record: %s", lines[2])
	}
	// Known writes: a number, 0 included.
	e.Process.WrittenKnown = true
	b.Reset()
	WriteAccess(&b, 42, "app", access.Epoch{Process: e.Process}, sym, false)
	if !strings.Contains(b.String(), `"written_bytes":0,`) {
		t.Errorf("known written bytes: %s", b.String())
	}
}

// TestWriteAccessText: the section names the method, carries the
// sub-page caveat and shows unknown writes as "?".
func TestWriteAccessText(t *testing.T) {
	site := aggregate.SiteKey{Address: 0x401000, StackID: -1}
	f := access.Figures{Live: 1 << 20, Touched: 1 << 19}
	e := access.Epoch{Number: 2, StartNS: 0, EndNS: 1e9, Method: "pagemap+pte-walk", Process: f,
		Sites: []access.SiteFigures{{Site: site, Figures: f}}}
	var b bytes.Buffer
	sym := fakeSymbolizer{0x401000: symbolize.Frame{Function: "make_cache", File: "cache.c", Line: 12}}
	if err := WriteAccessText(&b, 42, "app", e, sym, Options{}); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"memory by access, pid 42 (app): epoch 2 (1s), read by pagemap+pte-walk", AccessNote,
		"make_cache (cache.c:12)", "written: ?"} {
		if !strings.Contains(b.String(), want) {
			t.Errorf("no %q in\n%s", want, b.String())
		}
	}
}
