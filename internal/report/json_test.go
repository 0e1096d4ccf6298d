package report

import (
	"bytes"
	"encoding/json"
	"os"
	"reflect"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/symbolize"
)

// The field names and order of each record type: the contract in
// docs/json.md. Changing these lists means breaking users' scripts.
var jsonFields = map[string][]string{
	"report": {"type", "time_ns", "final", "lost_events", "processes", "sort", "top", "host", "sampled", "sample_bytes", "kernel", "attach", "memtrace_peak_rss_bytes", "memtrace_rss_bytes"},
	"process": {"type", "pid", "comm", "live_bytes", "live_allocs", "allocs", "alloc_bytes",
		"frees", "freed_bytes", "peak_live_bytes", "unmatched_frees", "lost_events", "final",
		"exited", "time_ns", "mmap", "exit_time_ns", "rates", "sampled", "sample_bytes", "live_bytes_stderr",
		"footprint", "resident"},
	"callsite": {"type", "pid", "category", "function", "file", "line", "module", "address",
		"live_bytes", "live_allocs", "allocs", "alloc_bytes", "frees", "freed_bytes", "final",
		"offset", "time_ns", "rates", "inlined", "python", "comm", "sampled", "sample_bytes", "live_bytes_stderr",
		"leaf_function", "leaf_file", "leaf_line", "leaf_module", "leaf_address",
		"reserved_bytes", "committed_bytes", "resident_bytes"},
	"peak": {"type", "pid", "comm", "time_ns", "live_bytes", "peak_live_bytes", "tolerance_bytes",
		"snapshots", "final", "sampled", "sample_bytes", "live_bytes_stderr"},
	"mark": {"type", "pid", "label", "seq", "time_ns"},
}

// hostProcessFields follow comm in whole-host process records only.
var hostProcessFields = []string{"rank", "traced"}

// hostFields are the fields of a whole-host record of type typ.
func hostFields(typ string) []string {
	f := jsonFields[typ]
	if typ != "process" {
		return f
	}
	return slices.Concat(f[:3], hostProcessFields, f[3:])
}

// detailFields end callsite records only with --detail.
var detailFields = []string{"stack", "stack_truncated"}

// leakFields end process and callsite records (before detailFields) only
// in runs with a leak check (Options.Leaks).
var leakFields = []string{"definitely_lost_bytes", "definitely_lost_blocks",
	"indirectly_lost_bytes", "indirectly_lost_blocks", "possibly_lost_bytes", "possibly_lost_blocks",
	"reachable_bytes", "reachable_blocks", "suppressed_bytes", "suppressed_blocks"}

var leakProcessFields = append([]string{"leak_checked"}, leakFields...)

// epochFields follow the leak fields of process and callsite records only
// in numbered dumps (Options.Epoch); reportEpochFields end the report line.
var epochFields = []string{"epoch_allocs", "epoch_alloc_bytes", "epoch_frees", "epoch_freed_bytes"}

var reportEpochFields = []string{"epoch", "epoch_start_ns"}

// jvmProcessFields and jvmFields end a JVM's process and heap callsite records.
var jvmProcessFields, jvmFields = []string{"jvm_categories"}, []string{"jvm_category"}

// managedHeapFields follow a process's resident object when it has a
// runtime heap (a JVM's, V8's).
var managedHeapFields = []string{"managed_heaps"}

// managedHeapSiteFields end an mmap callsite of a runtime heap's
// allocator.
var managedHeapSiteFields = []string{"managed_heap"}

// beforeTableFields end the callsite records of sites charged before their
// unwind table was in.
var beforeTableFields = []string{"before_table"}

var stackFrameFields = []string{"function", "file", "line", "module", "address", "inlined", "python"}

var mmapFields = []string{"live_bytes", "live_regions", "maps", "mapped_bytes", "unmaps",
	"unmapped_bytes", "peak_live_bytes", "reserved_bytes", "committed_bytes", "resident_bytes"}

// jsonLines runs WriteJSON and splits its output into lines, failing on a
// missing final newline.
func jsonLines(t *testing.T, s aggregate.Snapshot, sym Symbolizer, o Options) []string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteJSON(&b, s, sym, o); err != nil {
		t.Fatalf("WriteJSON: %v", err)
	}
	out := b.String()
	if !strings.HasSuffix(out, "\n") {
		t.Fatalf("output does not end with a newline: %q", out)
	}
	return strings.Split(strings.TrimSuffix(out, "\n"), "\n")
}

// objectKeys lists the keys of a JSON object in the order they appear.
func objectKeys(t *testing.T, raw []byte) []string {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		t.Fatalf("not a JSON object: %s", raw)
	}
	var keys []string
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("bad JSON %s: %v", raw, err)
		}
		keys = append(keys, tok.(string))
		var skip json.RawMessage
		if err := dec.Decode(&skip); err != nil {
			t.Fatalf("bad JSON %s: %v", raw, err)
		}
	}
	return keys
}

// decodeLine parses one line keeping numbers exact.
func decodeLine(t *testing.T, line string) map[string]any {
	t.Helper()
	dec := json.NewDecoder(strings.NewReader(line))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		t.Fatalf("line does not parse: %v\n%s", err, line)
	}
	if dec.More() {
		t.Fatalf("more than one value on a line: %s", line)
	}
	return m
}

func TestJSONEveryLineIsARecordWithExactFields(t *testing.T) {
	for _, o := range []Options{{}, {Top: 1, Final: true, Sort: SortAllocs}} {
		var types []string
		for _, line := range jsonLines(t, periodicSnapshot(), fixtureSymbols, o) {
			m := decodeLine(t, line)
			typ, _ := m["type"].(string)
			want, known := jsonFields[typ]
			if !known {
				t.Fatalf("line without a known type: %s", line)
			}
			types = append(types, typ)
			if got := objectKeys(t, []byte(line)); !slices.Equal(got, want) {
				t.Errorf("%s fields %v, want %v", typ, got, want)
			}
			if typ == "process" {
				if got := objectKeys(t, mmapObject(t, line)); !slices.Equal(got, mmapFields) {
					t.Errorf("mmap field order %v, want %v", got, mmapFields)
				}
			}
			if m["final"] != o.Final {
				t.Errorf("%s final = %v, want %v", typ, m["final"], o.Final)
			}
			// Every number must be an integer: uint64 figures never
			// become floats.
			for k, v := range m {
				if n, ok := v.(json.Number); ok {
					if _, err := strconv.ParseUint(n.String(), 10, 64); err != nil {
						t.Errorf("%s %s = %s is not a non-negative integer", typ, k, n)
					}
				}
			}
		}
		want := []string{"report", "process", "callsite", "callsite", "callsite", "callsite", "process", "callsite", "callsite"}
		if o.Top == 1 {
			// Top applies per process and category: one heap and one mmap
			// site for the busy process, which by allocs comes second.
			want = []string{"report", "process", "callsite", "process", "callsite", "callsite"}
		}
		if !slices.Equal(types, want) {
			t.Errorf("options %+v: record types %v, want %v", o, types, want)
		}
	}
}

// mmapObject extracts the raw "mmap" object of a process line, with its key
// order intact.
func mmapObject(t *testing.T, line string) []byte {
	t.Helper()
	var p struct {
		Mmap json.RawMessage `json:"mmap"`
	}
	if err := json.Unmarshal([]byte(line), &p); err != nil {
		t.Fatal(err)
	}
	return p.Mmap
}

func TestJSONValues(t *testing.T) {
	lines := jsonLines(t, periodicSnapshot(), fixtureSymbols, Options{Top: DefaultTop})
	want := []string{
		`{"type":"report","time_ns":5123456789012,"final":false,"lost_events":5,"processes":2,"sort":"live","top":10,"host":false,"sampled":false,"sample_bytes":0,"kernel":"","attach":"","memtrace_peak_rss_bytes":0,"memtrace_rss_bytes":0}`,
		`{"type":"process","pid":77,"comm":"worker","live_bytes":2097152,"live_allocs":12,"allocs":40,"alloc_bytes":3145728,"frees":28,"freed_bytes":1048576,"peak_live_bytes":2199552,"unmatched_frees":3,"lost_events":5,"final":false,"exited":true,"time_ns":5123456789012,"mmap":{"live_bytes":4194304,"live_regions":2,"maps":4,"mapped_bytes":8388608,"unmaps":2,"unmapped_bytes":4194304,"peak_live_bytes":6291456,"reserved_bytes":0,"committed_bytes":0,"resident_bytes":0},"exit_time_ns":9000000000,"rates":[],"sampled":false,"sample_bytes":0,"live_bytes_stderr":0,"footprint":{"rss_bytes":0,"rss_anon_bytes":0,"rss_file_bytes":0,"rss_shmem_bytes":0,"swap_bytes":0,"pss_bytes":0,"heap_resident_bytes":0,"heap_retained_bytes":0,"anon_resident_bytes":0,"stack_resident_bytes":0,"file_resident_bytes":0,"unexplained_bytes":0,"cgroup":"","cgroup_memory_bytes":0,"go_heap_reserved_bytes":0,"go_heap_committed_bytes":0,"go_heap_resident_bytes":0,"go_heap_source":"","go_runtime_resident_bytes":0},"resident":{"bytes":0,"bytes_stderr":0,"pages":0,"sample_bytes":0,"checked_ns":0}}`,
		`{"type":"callsite","pid":77,"category":"heap","function":"","file":"","line":0,"module":"/usr/lib/x86_64-linux-gnu/libfoo.so.1","address":"0x7f3a00001234","live_bytes":1572864,"live_allocs":10,"allocs":30,"alloc_bytes":2097152,"frees":20,"freed_bytes":1048576,"final":false,"offset":"0x1234","time_ns":5123456789012,"rates":[],"inlined":[],"python":false,"comm":"worker","sampled":false,"sample_bytes":0,"live_bytes_stderr":0,"leaf_function":"","leaf_file":"","leaf_line":0,"leaf_module":"","leaf_address":"","reserved_bytes":0,"committed_bytes":0,"resident_bytes":0}`,
		`{"type":"callsite","pid":77,"category":"heap","function":"make_buffer(unsigned long)","file":"src/buf.c","line":42,"module":"/usr/bin/myserver","address":"0x401a2b","live_bytes":523265,"live_allocs":1,"allocs":9,"alloc_bytes":1047553,"frees":8,"freed_bytes":524288,"final":false,"offset":"0x1a2b","time_ns":5123456789012,"rates":[],"inlined":[],"python":false,"comm":"worker","sampled":false,"sample_bytes":0,"live_bytes_stderr":0,"leaf_function":"","leaf_file":"","leaf_line":0,"leaf_module":"","leaf_address":"","reserved_bytes":0,"committed_bytes":0,"resident_bytes":0}`,
		`{"type":"callsite","pid":77,"category":"heap","function":"","file":"","line":0,"module":"","address":"0xdeadbeef","live_bytes":1023,"live_allocs":1,"allocs":1,"alloc_bytes":1023,"frees":0,"freed_bytes":0,"final":false,"offset":"","time_ns":5123456789012,"rates":[],"inlined":[],"python":false,"comm":"worker","sampled":false,"sample_bytes":0,"live_bytes_stderr":0,"leaf_function":"","leaf_file":"","leaf_line":0,"leaf_module":"","leaf_address":"","reserved_bytes":0,"committed_bytes":0,"resident_bytes":0}`,
		`{"type":"callsite","pid":77,"category":"mmap","function":"arena_grow","file":"src/arena.c","line":88,"module":"/usr/bin/myserver","address":"0x402200","live_bytes":4194304,"live_allocs":2,"allocs":4,"alloc_bytes":8388608,"frees":2,"freed_bytes":4194304,"final":false,"offset":"0x2200","time_ns":5123456789012,"rates":[],"inlined":[],"python":false,"comm":"worker","sampled":false,"sample_bytes":0,"live_bytes_stderr":0,"leaf_function":"","leaf_file":"","leaf_line":0,"leaf_module":"","leaf_address":"","reserved_bytes":0,"committed_bytes":0,"resident_bytes":0}`,
		`{"type":"process","pid":4242,"comm":"myserver","live_bytes":1048576,"live_allocs":10,"allocs":1020,"alloc_bytes":2621440,"frees":1010,"freed_bytes":1572864,"peak_live_bytes":1310720,"unmatched_frees":0,"lost_events":0,"final":false,"exited":false,"time_ns":5123456789012,"mmap":{"live_bytes":0,"live_regions":0,"maps":0,"mapped_bytes":0,"unmaps":0,"unmapped_bytes":0,"peak_live_bytes":0,"reserved_bytes":0,"committed_bytes":0,"resident_bytes":0},"exit_time_ns":0,"rates":[],"sampled":false,"sample_bytes":0,"live_bytes_stderr":0,"footprint":{"rss_bytes":0,"rss_anon_bytes":0,"rss_file_bytes":0,"rss_shmem_bytes":0,"swap_bytes":0,"pss_bytes":0,"heap_resident_bytes":0,"heap_retained_bytes":0,"anon_resident_bytes":0,"stack_resident_bytes":0,"file_resident_bytes":0,"unexplained_bytes":0,"cgroup":"","cgroup_memory_bytes":0,"go_heap_reserved_bytes":0,"go_heap_committed_bytes":0,"go_heap_resident_bytes":0,"go_heap_source":"","go_runtime_resident_bytes":0},"resident":{"bytes":0,"bytes_stderr":0,"pages":0,"sample_bytes":0,"checked_ns":0}}`,
		`{"type":"callsite","pid":4242,"category":"heap","function":"make_buffer(unsigned long)","file":"src/buf.c","line":42,"module":"/usr/bin/myserver","address":"0x401a2b","live_bytes":1048576,"live_allocs":10,"allocs":20,"alloc_bytes":2097152,"frees":10,"freed_bytes":1048576,"final":false,"offset":"0x1a2b","time_ns":5123456789012,"rates":[],"inlined":[],"python":false,"comm":"myserver","sampled":false,"sample_bytes":0,"live_bytes_stderr":0,"leaf_function":"","leaf_file":"","leaf_line":0,"leaf_module":"","leaf_address":"","reserved_bytes":0,"committed_bytes":0,"resident_bytes":0}`,
		`{"type":"callsite","pid":4242,"category":"heap","function":"parse_request","file":"src/http.c","line":310,"module":"/usr/bin/myserver","address":"0x401f00","live_bytes":0,"live_allocs":0,"allocs":1000,"alloc_bytes":524288,"frees":1000,"freed_bytes":524288,"final":false,"offset":"0x1f00","time_ns":5123456789012,"rates":[],"inlined":[],"python":false,"comm":"myserver","sampled":false,"sample_bytes":0,"live_bytes_stderr":0,"leaf_function":"","leaf_file":"","leaf_line":0,"leaf_module":"","leaf_address":"","reserved_bytes":0,"committed_bytes":0,"resident_bytes":0}`,
	}
	if len(lines) != len(want) {
		t.Fatalf("%d lines, want %d:\n%s", len(lines), len(want), strings.Join(lines, "\n"))
	}
	for i := range want {
		if lines[i] != want[i] {
			t.Errorf("line %d:\n got %s\nwant %s", i+1, lines[i], want[i])
		}
	}
}

func TestJSONAddressesAreHex(t *testing.T) {
	hexRE := regexp.MustCompile(`^0x[0-9a-f]+$`)
	for _, line := range jsonLines(t, periodicSnapshot(), nil, Options{}) {
		m := decodeLine(t, line)
		if m["type"] != "callsite" {
			continue
		}
		if a, _ := m["address"].(string); !hexRE.MatchString(a) {
			t.Errorf("address %q is not a 0x hex string", m["address"])
		}
	}
}

func TestJSONExactLargeNumbersAndUnescapedNames(t *testing.T) {
	const huge = 1<<63 + 1 // beyond float64's exact integers
	s := snapshotOf(0, aggregate.ProcessSnapshot{
		PID:   1,
		Heap:  aggregate.Stats{LiveBytes: huge},
		Sites: []aggregate.SiteSnapshot{{Address: 0x10, Stats: aggregate.Stats{LiveBytes: huge}}},
	})
	sym := fakeSymbolizer{0x10: symbolize.Frame{Function: "std::vector<int>::push_back(int&&)", Module: "/a.out"}}
	var b bytes.Buffer
	if err := WriteJSON(&b, s, sym, Options{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, w := range []string{`"live_bytes":9223372036854775809`, `"function":"std::vector<int>::push_back(int&&)"`} {
		if !strings.Contains(out, w) {
			t.Errorf("output lacks %s:\n%s", w, out)
		}
	}
}

func TestJSONEmptySnapshot(t *testing.T) {
	lines := jsonLines(t, aggregate.Snapshot{Time: 7}, nil, Options{Final: true, Kernel: "6.1.0-56-amd64", Attach: "per-probe"})
	want := `{"type":"report","time_ns":7,"final":true,"lost_events":0,"processes":0,"sort":"live","top":0,"host":false,"sampled":false,"sample_bytes":0,"kernel":"6.1.0-56-amd64","attach":"per-probe","memtrace_peak_rss_bytes":0,"memtrace_rss_bytes":0}`
	if len(lines) != 1 || lines[0] != want {
		t.Errorf("got %q, want one line %s", lines, want)
	}
}

// TestJSONRecordsMatchDocs guards docs/json.md against drift: every field
// of every record must be documented there.
func TestJSONRecordsMatchDocs(t *testing.T) {
	doc, err := readDoc()
	if err != nil {
		t.Fatalf("docs/json.md, the published contract, is not readable: %v", err)
	}
	for typ, fields := range jsonFields {
		for _, f := range fields {
			if !strings.Contains(doc, "`"+f+"`") {
				t.Errorf("docs/json.md does not document %s field `%s`", typ, f)
			}
		}
	}
	for _, f := range mmapFields {
		if !strings.Contains(doc, "`mmap."+f+"`") {
			t.Errorf("docs/json.md does not document `mmap.%s`", f)
		}
	}
	for _, f := range slices.Concat(managedHeapFields, detailFields, leakProcessFields, epochFields, reportEpochFields, jvmProcessFields, jvmFields, beforeTableFields) {
		if !strings.Contains(doc, "`"+f+"`") {
			t.Errorf("docs/json.md does not document field `%s`", f)
		}
	}
	for _, f := range hostProcessFields {
		if !strings.Contains(doc, "`"+f+"`") {
			t.Errorf("docs/json.md does not document the whole host's process field `%s`", f)
		}
	}
	// The record structs and the lists above must agree too.
	for typ, v := range map[string]any{"report": reportRecord{}, "process": processRecord{}, "callsite": callsiteRecord{},
		"peak": peakRecord{}, "mark": markRecord{}} {
		want := jsonFields[typ]
		switch typ {
		case "report":
			want = slices.Concat(want, reportEpochFields)
		case "process":
			want = slices.Concat(hostFields(typ), managedHeapFields, leakProcessFields, epochFields, jvmProcessFields)
		case "callsite":
			want = slices.Concat(want, leakFields, epochFields, detailFields, jvmFields, beforeTableFields, managedHeapSiteFields)
		}
		if got := jsonTags(v); !slices.Equal(got, want) {
			t.Errorf("%s struct tags %v, want %v", typ, got, want)
		}
	}
	if got := jsonTags(stackFrame{}); !slices.Equal(got, stackFrameFields) {
		t.Errorf("stack frame tags %v, want %v", got, stackFrameFields)
	}
}

// jsonTags lists a record's JSON names in order; embedded structs are
// flattened, as encoding/json writes them.
func jsonTags(v any) []string {
	return typeTags(reflect.TypeOf(v))
}

func typeTags(rt reflect.Type) []string {
	var tags []string
	for i := range rt.NumField() {
		f := rt.Field(i)
		if f.Anonymous && f.Tag.Get("json") == "" {
			tags = append(tags, typeTags(f.Type)...)
			continue
		}
		tags = append(tags, strings.Split(f.Tag.Get("json"), ",")[0])
	}
	return tags
}

func readDoc() (string, error) {
	b, err := os.ReadFile("../../docs/json.md")
	return string(b), err
}

// A JVM's records end with its categories; other processes' have none.
func TestJSONJVMCategories(t *testing.T) {
	site := aggregate.SiteSnapshot{Address: 0x10, JVMCategory: "Symbol", Stats: aggregate.Stats{LiveBytes: 40, LiveAllocs: 2, Allocs: 2, AllocBytes: 40}}
	jvm := aggregate.ProcessSnapshot{PID: 1, Heap: site.Stats, Sites: []aggregate.SiteSnapshot{site},
		JVM: []aggregate.JVMCategoryStats{{Name: "Symbol", Stats: site.Stats}, {Name: "", Stats: aggregate.Stats{}}}}
	other := aggregate.ProcessSnapshot{PID: 2, Heap: site.Stats, Sites: []aggregate.SiteSnapshot{{Address: 0x10, Stats: site.Stats}}}
	lines := jsonLines(t, snapshotOf(0, jvm, other), fakeSymbolizer{}, Options{})
	var got []string
	for _, l := range lines {
		if i := strings.Index(l, `"jvm_categor`); i >= 0 {
			got = append(got, l[i:])
		} else if !strings.Contains(l, `"type":"report"`) {
			got = append(got, "none")
		}
	}
	want := []string{
		`"jvm_categories":[{"name":"Symbol","live_bytes":40,"live_allocs":2,"allocs":2,"alloc_bytes":40,"frees":0,"freed_bytes":0},{"name":"","live_bytes":0,"live_allocs":0,"allocs":0,"alloc_bytes":0,"frees":0,"freed_bytes":0}]}`,
		`"jvm_category":"Symbol"}`,
		"none", "none",
	}
	if !slices.Equal(got, want) {
		t.Errorf("got\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}
