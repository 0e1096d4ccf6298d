package symbolize

import (
	"bytes"
	"errors"
	"fmt"
	"strconv"
)

// JIT runtimes name the code they generate in perf's two formats: a
// perf map (/tmp/perf-PID.map, text, one "START SIZE NAME" line per code
// object: node's --perf-basic-prof, .NET's DOTNET_PerfMapEnabled, JDK
// 17's jcmd Compiler.perfmap) and a jitdump (jit-PID.dump, binary: node's
// --perf-prof). Both files are written by the traced process: everything
// in them is untrusted, so both parsers bound what they accept.

// JITSymbol is one named range of generated code.
type JITSymbol struct {
	Start, Size uint64
	Name        string
}

// maxJITName bounds a symbol's name: longer names are cut (a JS function's
// name with its script's path is well under this).
const maxJITName = 1024

// maxPerfMapLine bounds a perf map line: a longer one is no perf map text.
const maxPerfMapLine = 16 << 10

// ErrPerfMapLine is returned for a line that is not "START SIZE NAME".
var ErrPerfMapLine = errors.New("not a perf map line (START SIZE NAME, hex)")

// ParsePerfMapLine parses one line of a perf map: the start address and the
// size in hex without 0x (a 0x prefix is accepted too), then the name,
// which runs to the end of the line and may hold spaces.
func ParsePerfMapLine(line []byte) (JITSymbol, error) {
	line = bytes.TrimRight(line, "\r\n")
	start, rest, ok := bytes.Cut(line, []byte{' '})
	if !ok {
		return JITSymbol{}, ErrPerfMapLine
	}
	size, name, ok := bytes.Cut(rest, []byte{' '})
	if !ok {
		return JITSymbol{}, ErrPerfMapLine
	}
	s, err := parseHex(start)
	if err != nil {
		return JITSymbol{}, fmt.Errorf("start %q: %w", start, ErrPerfMapLine)
	}
	n, err := parseHex(size)
	if err != nil || n == 0 || s+n < s {
		return JITSymbol{}, fmt.Errorf("size %q: %w", size, ErrPerfMapLine)
	}
	if len(name) == 0 || bytes.IndexByte(name, 0) >= 0 {
		return JITSymbol{}, fmt.Errorf("name: %w", ErrPerfMapLine)
	}
	return JITSymbol{Start: s, Size: n, Name: jitName(name)}, nil
}

func parseHex(b []byte) (uint64, error) {
	if len(b) > 2 && b[0] == '0' && (b[1] == 'x' || b[1] == 'X') {
		b = b[2:]
	}
	return strconv.ParseUint(string(b), 16, 64)
}

// jitName copies a name, cut to maxJITName bytes.
func jitName(b []byte) string {
	if len(b) > maxJITName {
		b = b[:maxJITName]
	}
	return string(b)
}

// ParsePerfMap parses the complete lines of data (a perf map read from some
// offset on) and returns their symbols and how many bytes they took: the
// text after the last newline is a line still being written, to be read
// again once complete. Lines that do not parse are skipped (bad counts
// them), as perf does; a line longer than maxPerfMapLine ends the parse
// with an error.
func ParsePerfMap(data []byte) (syms []JITSymbol, used int, bad int, err error) {
	for used < len(data) {
		i := bytes.IndexByte(data[used:], '\n')
		if i < 0 {
			if len(data)-used > maxPerfMapLine {
				return syms, used, bad, fmt.Errorf("perf map line at byte %d: longer than %d bytes", used, maxPerfMapLine)
			}
			break
		}
		if i > maxPerfMapLine {
			return syms, used, bad, fmt.Errorf("perf map line at byte %d: longer than %d bytes", used, maxPerfMapLine)
		}
		line := data[used : used+i]
		used += i + 1
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		s, err := ParsePerfMapLine(line)
		if err != nil {
			bad++
			continue
		}
		syms = append(syms, s)
	}
	return syms, used, bad, nil
}
