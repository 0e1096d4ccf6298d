package pipeline

import (
	"bytes"
	"fmt"
	"os"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/memtrace/memtrace/internal/event"
)

// MarkLabel is the label of a live mark event: the string the probe read
// from the --mark function's first argument, or, when it could not, the
// string there read now from the process's memory; when that is no
// printable string, the --mark function's name (marks, by index).
func MarkLabel(e *event.Event, marks []string) string {
	label := e.Label
	if label == "" && e.Addr != 0 {
		label = readCString(int(e.PID), e.Addr)
	}
	if printable(label) {
		return label
	}
	if i := int(e.Size); i < len(marks) {
		return marks[i]
	}
	return ""
}

// readCString reads a NUL-terminated string of at most 255 bytes at addr
// in process pid ("" when it cannot).
func readCString(pid int, addr uint64) string {
	f, err := os.Open(fmt.Sprintf("/proc/%d/mem", pid))
	if err != nil {
		return ""
	}
	defer f.Close()
	b := make([]byte, 256)
	n, _ := f.ReadAt(b, int64(addr))
	b = b[:n]
	i := bytes.IndexByte(b, 0)
	if i < 0 {
		return ""
	}
	return string(b[:i])
}

// printable says whether a mark's first argument read as a C string is
// one: non-empty, valid UTF-8, no control characters.
func printable(s string) bool {
	if s == "" || !utf8.ValidString(s) {
		return false
	}
	return strings.IndexFunc(s, func(r rune) bool { return !unicode.IsPrint(r) && r != '\t' }) < 0
}
