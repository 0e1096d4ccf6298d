package diff

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// Two runs' NDJSON: a periodic report (ignored), then the final one. The
// process is matched by comm whatever its pid, the site by module file
// name, function, file, line and offset whatever its address and
// directory; a site on one side only is compared with zero.
const oldRun = `{"type":"report","final":false}
{"type":"process","pid":10,"comm":"app","live_bytes":1,"allocs":1}
{"type":"report","final":true}
{"type":"process","pid":10,"comm":"app","live_bytes":100,"live_allocs":2,"allocs":5,"alloc_bytes":300,"frees":3,"freed_bytes":200,"peak_live_bytes":150}
{"type":"callsite","pid":10,"category":"heap","function":"f","file":"a.c","line":3,"module":"/old/app","offset":"0x10","address":"0x5550","live_bytes":100,"live_allocs":2,"allocs":5,"alloc_bytes":300,"frees":3,"freed_bytes":200}
{"type":"callsite","pid":10,"category":"heap","function":"gone","file":"a.c","line":9,"module":"/old/app","offset":"0x20","live_bytes":0,"allocs":1,"alloc_bytes":8,"frees":1,"freed_bytes":8}
`

const newRun = `{"type":"report","final":true}
{"type":"process","pid":77,"comm":"app","live_bytes":40,"live_allocs":1,"allocs":6,"alloc_bytes":340,"frees":5,"freed_bytes":300,"peak_live_bytes":150}
{"type":"callsite","pid":77,"category":"heap","function":"f","file":"a.c","line":3,"module":"/new/app","offset":"0x10","address":"0x7770","live_bytes":40,"live_allocs":1,"allocs":5,"alloc_bytes":300,"frees":4,"freed_bytes":260}
{"type":"callsite","pid":77,"category":"heap","function":"h","file":"b.c","line":1,"module":"/new/app","offset":"0x30","live_bytes":0,"allocs":1,"alloc_bytes":40,"frees":1,"freed_bytes":40}
`

func TestCompare(t *testing.T) {
	o, err := ReadNDJSON(strings.NewReader(oldRun))
	if err != nil {
		t.Fatal(err)
	}
	n, err := ReadNDJSON(strings.NewReader(newRun))
	if err != nil {
		t.Fatal(err)
	}
	res := Compare(o, n)
	var b bytes.Buffer
	if err := WriteJSON(&b, res); err != nil {
		t.Fatal(err)
	}
	want := []string{
		`{"type":"process_diff","comm":"app","live_bytes":40,"live_bytes_delta":-60,"live_allocs":1,"live_allocs_delta":-1,"allocs":6,"allocs_delta":1,"alloc_bytes":340,"alloc_bytes_delta":40,"frees":5,"frees_delta":2,"freed_bytes":300,"freed_bytes_delta":100,"peak_live_bytes":150,"peak_live_bytes_delta":0}`,
		`{"type":"callsite_diff","comm":"app","category":"heap","function":"f","file":"a.c","line":3,"module":"app","offset":"0x10","live_bytes":40,"live_bytes_delta":-60,"live_allocs":1,"live_allocs_delta":-1,"allocs":5,"allocs_delta":0,"alloc_bytes":300,"alloc_bytes_delta":0,"frees":4,"frees_delta":1,"freed_bytes":260,"freed_bytes_delta":60,"peak_live_bytes":0,"peak_live_bytes_delta":0}`,
		`{"type":"callsite_diff","comm":"app","category":"heap","function":"h","file":"b.c","line":1,"module":"app","offset":"0x30","live_bytes":0,"live_bytes_delta":0,"live_allocs":0,"live_allocs_delta":0,"allocs":1,"allocs_delta":1,"alloc_bytes":40,"alloc_bytes_delta":40,"frees":1,"frees_delta":1,"freed_bytes":40,"freed_bytes_delta":40,"peak_live_bytes":0,"peak_live_bytes_delta":0}`,
		`{"type":"callsite_diff","comm":"app","category":"heap","function":"gone","file":"a.c","line":9,"module":"app","offset":"0x20","live_bytes":0,"live_bytes_delta":0,"live_allocs":0,"live_allocs_delta":0,"allocs":0,"allocs_delta":-1,"alloc_bytes":0,"alloc_bytes_delta":-8,"frees":0,"frees_delta":-1,"freed_bytes":0,"freed_bytes_delta":-8,"peak_live_bytes":0,"peak_live_bytes_delta":0}`,
	}
	got := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(got) != len(want) {
		t.Fatalf("got %d lines:\n%s", len(got), b.String())
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("line %d:\n got %s\nwant %s", i, got[i], want[i])
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(got[i]), &m); err != nil {
			t.Fatal(err)
		}
	}
	if g := res.Growth(); g != 0 {
		t.Errorf("growth %d, want 0 (live bytes fell)", g)
	}
	if g := Compare(n, o).Growth(); g != 60 {
		t.Errorf("reverse growth %d, want 60", g)
	}
	var text bytes.Buffer
	WriteText(&text, res, true)
	if !strings.Contains(text.String(), "live:      40 B (-60 B) in 1 (-1) blocks") {
		t.Errorf("text:\n%s", text.String())
	}
}

func TestReadNDJSONErrors(t *testing.T) {
	for _, in := range []string{"", "not json\n", `{"type":"process","pid":1}` + "\n"} {
		if _, err := ReadNDJSON(strings.NewReader(in)); err == nil {
			t.Errorf("ReadNDJSON(%q) did not fail", in)
		}
	}
}

// FuzzReadNDJSON: a dump or --json output is outside input (a file given
// to memtrace diff): any bytes read without a panic.
func FuzzReadNDJSON(f *testing.F) {
	f.Add([]byte(`{"type":"report","final":true}` + "\n" + `{"type":"process","pid":1,"comm":"a","live_bytes":5}` + "\n" +
		`{"type":"callsite","pid":1,"category":"heap","function":"f","live_bytes":5}` + "\n"))
	f.Add([]byte(`{"type":"callsite","pid":1}`))
	f.Fuzz(func(t *testing.T, in []byte) {
		side, err := ReadNDJSON(bytes.NewReader(in))
		if err != nil {
			return
		}
		var b bytes.Buffer
		WriteText(&b, Compare(side, side), false)
	})
}

// TestCompareAccess: each process's latest access epoch is compared per
// site, matched without the offset that access records lack; sides
// without access records have no access rows.
func TestCompareAccess(t *testing.T) {
	old := `{"type":"access_process","pid":5,"comm":"app","epoch":1,"live_bytes":1,"touched_bytes":1}
{"type":"access","pid":5,"comm":"app","epoch":1,"category":"heap","function":"f","file":"a.c","line":3,"module":"/old/app","live_bytes":1,"touched_bytes":1}
{"type":"access_process","pid":5,"comm":"app","epoch":2,"live_bytes":8192,"touched_bytes":4096,"cold_bytes":4096}
{"type":"access","pid":5,"comm":"app","epoch":2,"category":"heap","function":"f","file":"a.c","line":3,"module":"/old/app","live_bytes":8192,"touched_bytes":4096,"cold_bytes":4096}
{"type":"report","final":true}
{"type":"process","pid":5,"comm":"app","live_bytes":8192}
`
	new := `{"type":"access_process","pid":9,"comm":"app","epoch":4,"live_bytes":12288,"touched_bytes":4096,"cold_bytes":8192,"never_touched_bytes":0}
{"type":"access","pid":9,"comm":"app","epoch":4,"category":"heap","function":"f","file":"a.c","line":3,"module":"/new/app","live_bytes":12288,"touched_bytes":4096,"cold_bytes":8192}
{"type":"report","final":true}
{"type":"process","pid":9,"comm":"app","live_bytes":12288}
`
	o, err := ReadNDJSON(strings.NewReader(old))
	if err != nil {
		t.Fatal(err)
	}
	n, err := ReadNDJSON(strings.NewReader(new))
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := WriteJSON(&b, Compare(o, n)); err != nil {
		t.Fatal(err)
	}
	want := `{"type":"process_diff","comm":"app","live_bytes":12288,"live_bytes_delta":4096,"live_allocs":0,"live_allocs_delta":0,"allocs":0,"allocs_delta":0,"alloc_bytes":0,"alloc_bytes_delta":0,"frees":0,"frees_delta":0,"freed_bytes":0,"freed_bytes_delta":0,"peak_live_bytes":0,"peak_live_bytes_delta":0}
{"type":"access_process_diff","comm":"app","live_bytes":12288,"live_bytes_delta":4096,"touched_bytes":4096,"touched_bytes_delta":0,"cold_bytes":8192,"cold_bytes_delta":4096,"never_touched_bytes":0,"never_touched_bytes_delta":0}
{"type":"access_diff","comm":"app","category":"heap","function":"f","file":"a.c","line":3,"module":"app","offset":"","live_bytes":12288,"live_bytes_delta":4096,"touched_bytes":4096,"touched_bytes_delta":0,"cold_bytes":8192,"cold_bytes_delta":4096,"never_touched_bytes":0,"never_touched_bytes_delta":0}
`
	if b.String() != want {
		t.Errorf("got\n%s\nwant\n%s", b.String(), want)
	}
	b.Reset()
	if err := WriteText(&b, Compare(o, n), false); err != nil {
		t.Fatal(err)
	}
	wantText := `app
  live:      12.0 KiB (+4.0 KiB) in 0 (+0) blocks, peak live 0 B (+0 B)
  allocated: 0 B (+0 B) in 0 (+0) calls
  freed:     0 B (+0 B) in 0 (+0) blocks
  access:    live 12.0 KiB (+4.0 KiB), touched 4.0 KiB (+0 B), cold 8.0 KiB (+4.0 KiB), never touched 0 B (+0 B) (latest epochs)
  call sites by access change:
    cold 8.0 KiB (+4.0 KiB), touched 4.0 KiB (+0 B), never touched 0 B (+0 B), live 12.0 KiB (+4.0 KiB)  f  a.c:3  app
`
	if b.String() != wantText {
		t.Errorf("got\n%s\nwant\n%s", b.String(), wantText)
	}
	// Without access records on either side: no access rows.
	res := Compare(newSide(), newSide())
	if len(res.AccessProcesses)+len(res.AccessSites) != 0 {
		t.Errorf("access rows without access records: %+v", res)
	}
}
