package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/callstack"
	"github.com/memtrace/memtrace/internal/symbolize"
)

// inlinedFrame is a call in make_buffer, inlined into wrap, inlined into
// serve_request(int).
var inlinedFrame = symbolize.Frame{
	Address: 0x401a2b, Function: "serve_request(int)", File: "src/buf.c", Line: 42,
	Module: "/usr/bin/myserver", Offset: 0x401a26,
	Inlined: []symbolize.InlineFrame{
		{Function: "make_buffer(unsigned long)", File: "src/buf.c", Line: 42},
		{Function: "wrap(unsigned long)", File: "src/wrap.h", Line: 7},
		{Function: "serve_request(int)", File: "src/server.c", Line: 99},
	},
}

func TestFunctionLabelInlined(t *testing.T) {
	if got, want := functionLabel(inlinedFrame), "make_buffer(unsigned long) (inlined in serve_request(int))"; got != want {
		t.Errorf("functionLabel = %q, want %q", got, want)
	}
	long := symbolize.Frame{Function: "std::vector<std::pair<int, long>, std::allocator<std::pair<int, long> > >::_M_realloc_insert<std::pair<int, long> >(__gnu_cxx::__normal_iterator<std::pair<int, long>*, std::vector<std::pair<int, long>, std::allocator<std::pair<int, long> > > >, std::pair<int, long>&&)"}
	if got, want := functionLabel(long), "std::vector<…>::_M_realloc_insert<…>(…)"; got != want {
		t.Errorf("functionLabel(long) = %q, want %q", got, want)
	}
	fits := symbolize.Frame{Function: "std::vector<int>::push_back(int&&)"}
	if got := functionLabel(fits); got != fits.Function {
		t.Errorf("a name that fits was shortened to %q", got)
	}
}

func TestStackLinesInlined(t *testing.T) {
	caller := symbolize.Frame{Address: 0x401f00, Function: "main", File: "src/main.c", Line: 5, Module: "/usr/bin/myserver"}
	got := stackLines(callstack.Stack{Frames: []symbolize.Frame{inlinedFrame, caller}})
	want := []string{
		stackIndent + "<- wrap(unsigned long) (inlined)  src/wrap.h:7  myserver",
		stackIndent + "<- serve_request(int)  src/server.c:99  myserver",
		stackIndent + "<- main  src/main.c:5  myserver",
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("stack lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestJSONInlined(t *testing.T) {
	s := snapshotOf(0, aggregate.ProcessSnapshot{
		PID:   1,
		Sites: []aggregate.SiteSnapshot{{Address: 0x401a2b, Stats: aggregate.Stats{LiveBytes: 8}}},
	})
	var b bytes.Buffer
	if err := WriteJSON(&b, s, fakeSymbolizer{0x401a2b: inlinedFrame}, Options{}); err != nil {
		t.Fatal(err)
	}
	want := `"offset":"0x401a26",` // the call instruction
	wantInlined := `"inlined":[{"function":"make_buffer(unsigned long)","file":"src/buf.c","line":42},{"function":"wrap(unsigned long)","file":"src/wrap.h","line":7},{"function":"serve_request(int)","file":"src/server.c","line":99}]`
	for _, w := range []string{want, wantInlined, `"function":"serve_request(int)"`} {
		if !strings.Contains(b.String(), w) {
			t.Errorf("JSON lacks %s:\n%s", w, b.String())
		}
	}
}
