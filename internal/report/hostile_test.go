package report

import (
	"bytes"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/aggregate"
)

// TestHostileNames: a comm, function, file and module holding escape
// sequences, a line break and bytes that are not UTF-8 show escaped in
// the text report, -p and whole-host alike, and the columns after a name
// stay where the header puts them.
func TestHostileNames(t *testing.T) {
	const evil = "\x1b]0;PWN\x07\x1b[2J\xff"
	sym := fakeSymbolizer{addrMakeBuffer: {Function: "f\n" + evil, File: "src/" + evil + ".c", Line: 7,
		Module: "/usr/bin/" + evil, Offset: 0x1a2b}}
	p := twoSiteProcess()
	p.Comm = evil
	snap := aggregate.Snapshot{Time: 1e9, Processes: []aggregate.ProcessSnapshot{p}}
	const shown = `\x1b]0;PWN\x07\x1b[2J\xff`
	for _, host := range []bool{false, true} {
		var b bytes.Buffer
		if err := WriteText(&b, snap, sym, Options{Top: 5, Host: host}); err != nil {
			t.Fatal(err)
		}
		out := b.String()
		for i, c := range []byte(out) {
			if (c < 0x20 && c != '\n') || c == 0x7f {
				t.Fatalf("host=%v: control byte %#x at %d:\n%s", host, c, i, out)
			}
		}
		for _, want := range []string{"f\\n" + shown, "src/" + shown + ".c:7", " " + shown + "\n"} {
			if !strings.Contains(out, want) {
				t.Errorf("host=%v: no %q in:\n%s", host, want, out)
			}
		}
		// The MODULE column starts at the same offset in the header and
		// in the row of the hostile site.
		var head, row string
		for l := range strings.Lines(out) {
			switch {
			case strings.Contains(l, "MODULE") && head == "":
				head = l
			case strings.Contains(l, "f\\n") && row == "" && head != "":
				row = l
			}
		}
		if h, r := strings.Index(head, "MODULE"), strings.Index(row, shown+"\n"); head == "" || h != r {
			t.Errorf("host=%v: MODULE at %d in the header, the module at %d in its row:\n%s%s", host, h, r, head, row)
		}
	}
}
