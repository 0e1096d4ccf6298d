package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/aggregate"
	"github.com/memtrace/memtrace/internal/symbolize"
)

func TestWriteTextJVM(t *testing.T) {
	site := aggregate.SiteSnapshot{Address: 0x10, JVMCategory: "Symbol", Stats: aggregate.Stats{LiveBytes: 40, LiveAllocs: 2, Allocs: 2, AllocBytes: 40}}
	bare := aggregate.SiteSnapshot{Address: 0x20, Stats: aggregate.Stats{LiveBytes: 8, LiveAllocs: 1, Allocs: 1, AllocBytes: 8}}
	p := aggregate.ProcessSnapshot{PID: 7, Comm: "java", Sites: []aggregate.SiteSnapshot{site, bare},
		JVM: []aggregate.JVMCategoryStats{{Name: "Symbol", Stats: site.Stats}, {Name: "", Stats: bare.Stats}}}
	sym := fakeSymbolizer{
		0x10: symbolize.Frame{Function: "SymbolTable::allocate_symbol", Module: "/jdk/lib/server/libjvm.so"},
		0x20: symbolize.Frame{Function: "setlocale", Module: "/lib/libc.so.6"},
	}
	var b bytes.Buffer
	if err := WriteText(&b, snapshotOf(0, p), sym, Options{Top: DefaultTop}); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"  JVM heap by NMT category (os::malloc's MEMFLAGS):\n" +
		"   LIVE  BLOCKS  ALLOCATED  CALLS  FREED  CATEGORY\n" +
		"   40 B       2       40 B      2    0 B  Symbol\n" +
		"    8 B       1        8 B      1    0 B  (no category)\n" +
		"\n" +
		"  heap call sites by live bytes (all 2):\n" +
		"   LIVE  BLOCKS  ALLOCATED  CALLS  FREED  FUNCTION                      LOCATION  MODULE     NMT CATEGORY\n" +
		"   40 B       2       40 B      2    0 B  SymbolTable::allocate_symbol  -         libjvm.so  Symbol\n" +
		"    8 B       1        8 B      1    0 B  setlocale                     -         libc.so.6  (no category)\n"
	if !strings.Contains(b.String(), want) {
		t.Errorf("got\n%s\nwant it to contain\n%s", b.String(), want)
	}
}
