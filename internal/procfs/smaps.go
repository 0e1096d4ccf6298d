package procfs

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
)

// VMA is one entry of /proc/PID/smaps: its mapping and the fields read of
// it. Parsed from maps, only Mapping is set.
type VMA struct {
	Mapping
	// Rss is the bytes of it resident now; Pss its proportional share
	// (a page shared by n processes counts 1/n).
	Rss, Pss uint64
}

// ParseSmaps parses /proc/PID/smaps, or maps (whose lines are smaps's
// headers), sorted by address. Of the fields only Rss and Pss are read.
func ParseSmaps(r io.Reader) ([]VMA, error) {
	var out []VMA
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxMapsLine)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		key, rest, _ := bytes.Cut(line, []byte{' '})
		if key[len(key)-1] == ':' {
			var dst *uint64
			if len(out) > 0 {
				switch string(key) {
				case "Rss:":
					dst = &out[len(out)-1].Rss
				case "Pss:":
					dst = &out[len(out)-1].Pss
				}
			}
			if dst != nil {
				kb, err := kbField(rest)
				if err != nil {
					return nil, fmt.Errorf("parse smaps line %d: %w", n, err)
				}
				*dst = kb << 10
			}
			continue
		}
		m, err := parseHeader(string(line))
		if err != nil {
			return nil, fmt.Errorf("parse smaps line %d: %w", n, err)
		}
		out = append(out, VMA{Mapping: m})
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read smaps after line %d: %w", n, err)
	}
	slices.SortStableFunc(out, func(a, b VMA) int { return cmp.Compare(a.Start, b.Start) })
	return out, nil
}

// kbField parses "   1234 kB".
func kbField(b []byte) (uint64, error) {
	b = bytes.TrimSpace(bytes.TrimSuffix(bytes.TrimSpace(b), []byte("kB")))
	n, err := strconv.ParseUint(string(b), 10, 64)
	if err != nil {
		return 0, fmt.Errorf("field %q: %w", b, err)
	}
	return n, nil
}
