package report

import (
	"path"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/memtrace/memtrace/internal/symbolize"
	"github.com/memtrace/memtrace/internal/textsafe"
)

// Widths past which text cells are shortened. Demangled C++ names and
// build-tree paths can run to hundreds of characters and would push the
// figures off screen; JSON always carries them whole.
const (
	maxFunctionWidth = 60
	maxLocationWidth = 48
)

// unknownLabel marks what could not be resolved; a table cell is never left
// empty, because an empty cell reads as "nothing" rather than "don't know".
const unknownLabel = "[unknown]"

// The labels below are printed in text tables and sent to Prometheus, so
// each is escaped (textsafe): the names come from the traced process's
// binaries.

// functionLabel names a frame's function for the text table. Without a
// symbol it falls back to module+offset, which addr2line and gdb accept, so
// the user can still resolve it by hand; without a module, to the raw
// address.
func functionLabel(f symbolize.Frame) string {
	if f.Function != "" || len(f.Inlined) > 0 {
		return elideMiddle(textsafe.String(functionName(f)), maxFunctionWidth)
	}
	if f.Module != "" {
		return unknownLabel + " " + textsafe.String(path.Base(f.Module)) + "+" + hex(f.Offset)
	}
	return unknownLabel + " " + hex(f.Address)
}

// functionName is the frame's function, or "INNER (inlined in OUTER)"
// when the call is in inlined code, shortened as much as needed to fit
// (template arguments, then parameter lists elided; symbolize.ShortName).
func functionName(f symbolize.Frame) string {
	var s string
	for _, d := range []symbolize.NameDetail{symbolize.FullName, symbolize.NoTemplateArgs, symbolize.NoTemplateArgsOrParams} {
		s = symbolize.ShortName(f.Function, d)
		if n := len(f.Inlined); n > 1 {
			s = symbolize.ShortName(f.Inlined[0].Function, d) + " (inlined in " + symbolize.ShortName(f.Inlined[n-1].Function, d) + ")"
		}
		if utf8.RuneCountInString(s) <= maxFunctionWidth {
			break
		}
	}
	return s
}

// locationLabel is "file:line", shortened from the left, or "-" when the
// module has no line information (common for stripped libraries, so not
// worth an alarming "[unknown]").
func locationLabel(f symbolize.Frame) string {
	if f.File == "" {
		return "-"
	}
	loc := f.File
	if f.Line > 0 {
		loc += ":" + strconv.Itoa(f.Line)
	}
	return trimLeadingDirs(textsafe.String(loc), maxLocationWidth)
}

// moduleLabel is the basename of the frame's module: the full path rarely
// matters when reading and is in the JSON.
func moduleLabel(f symbolize.Frame) string {
	if f.Module == "" {
		return unknownLabel
	}
	return textsafe.String(path.Base(f.Module))
}

// hex formats an address or offset the way tools print them ("0x1234").
func hex(v uint64) string {
	return "0x" + strconv.FormatUint(v, 16)
}

// elideMiddle shortens s to max runes by cutting its middle. For C++ names
// both ends matter: the namespace and class at the front, the method name at
// the back; template arguments in between are what can go.
func elideMiddle(s string, max int) string {
	n := utf8.RuneCountInString(s)
	if n <= max {
		return s
	}
	r := []rune(s)
	head := (max - 1) / 2
	tail := max - 1 - head
	return string(r[:head]) + "…" + string(r[n-tail:])
}

// trimLeadingDirs drops whole leading directories until loc fits in max
// runes, marking the cut with "…/": the file name and its nearest
// directories identify a source file, the build root does not. A file name
// too long by itself is kept whole.
func trimLeadingDirs(loc string, max int) string {
	if utf8.RuneCountInString(loc) <= max {
		return loc
	}
	rest := loc
	for {
		i := strings.IndexByte(rest, '/')
		if i < 0 {
			return "…/" + rest
		}
		rest = rest[i+1:]
		if utf8.RuneCountInString(rest)+2 <= max {
			return "…/" + rest
		}
	}
}
