package symbolize

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
)

// Mapping is one line of /proc/PID/maps.
type Mapping struct {
	Start, End uint64 // [Start, End) in the process's address space
	Offset     uint64 // file offset mapped at Start
	Perms      string // e.g. "r-xp"
	Dev        string // "major:minor", in hex as the kernel prints it
	Inode      uint64
	// Path is the mapped file, a pseudo path such as "[heap]" or "[vdso]",
	// or "" for an anonymous mapping. A " (deleted)" suffix is removed and
	// recorded in Deleted instead.
	Path    string
	Deleted bool
}

// Executable reports whether the mapping holds code.
func (m Mapping) Executable() bool { return len(m.Perms) >= 3 && m.Perms[2] == 'x' }

// Pseudo reports whether Path names a kernel pseudo mapping ([vdso],
// [heap], ...) rather than a file.
func (m Mapping) Pseudo() bool { return strings.HasPrefix(m.Path, "[") }

// FileBacked reports whether the mapping has a file that can be opened.
func (m Mapping) FileBacked() bool {
	return m.Path != "" && !m.Pseudo() && m.Inode != 0
}

const deletedSuffix = " (deleted)"

// maxMapsLine bounds one line: a path is at most PATH_MAX (4096) bytes, so
// anything much longer is not maps text.
const maxMapsLine = 64 << 10

// ParseMaps parses the text of /proc/PID/maps. Blank lines are skipped.
func ParseMaps(r io.Reader) ([]Mapping, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 4096), maxMapsLine)
	var out []Mapping
	n := 0
	for sc.Scan() {
		n++
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			continue
		}
		m, err := parseMapsLine(line)
		if err != nil {
			return nil, fmt.Errorf("parse maps line %d: %w", n, err)
		}
		out = append(out, m)
	}
	if err := sc.Err(); err != nil {
		return nil, fmt.Errorf("read maps after line %d: %w", n, err)
	}
	return out, nil
}

// parseMapsLine parses "start-end perms offset dev inode [path]". The path
// runs from the first non-blank after the inode to the end of the line, so
// it may hold spaces.
func parseMapsLine(line string) (Mapping, error) {
	var m Mapping
	rest := line
	field := func(name string) (string, error) {
		rest = strings.TrimLeft(rest, " \t")
		i := strings.IndexAny(rest, " \t")
		if i < 0 {
			i = len(rest)
		}
		f := rest[:i]
		rest = rest[i:]
		if f == "" {
			return "", fmt.Errorf("missing %s", name)
		}
		return f, nil
	}

	rng, err := field("address range")
	if err != nil {
		return m, err
	}
	lo, hi, ok := strings.Cut(rng, "-")
	if !ok {
		return m, fmt.Errorf("address range %q: no '-'", rng)
	}
	if m.Start, err = strconv.ParseUint(lo, 16, 64); err != nil {
		return m, fmt.Errorf("start address: %w", err)
	}
	if m.End, err = strconv.ParseUint(hi, 16, 64); err != nil {
		return m, fmt.Errorf("end address: %w", err)
	}
	if m.End < m.Start {
		return m, fmt.Errorf("address range %q ends before it starts", rng)
	}

	if m.Perms, err = field("permissions"); err != nil {
		return m, err
	}
	if len(m.Perms) != 4 {
		return m, fmt.Errorf("permissions %q: want 4 characters", m.Perms)
	}

	off, err := field("offset")
	if err != nil {
		return m, err
	}
	if m.Offset, err = strconv.ParseUint(off, 16, 64); err != nil {
		return m, fmt.Errorf("offset: %w", err)
	}

	if m.Dev, err = field("device"); err != nil {
		return m, err
	}
	if err := checkDev(m.Dev); err != nil {
		return m, err
	}

	ino, err := field("inode")
	if err != nil {
		return m, err
	}
	if m.Inode, err = strconv.ParseUint(ino, 10, 64); err != nil {
		return m, fmt.Errorf("inode: %w", err)
	}

	m.Path = strings.TrimLeft(rest, " \t")
	if p, ok := strings.CutSuffix(m.Path, deletedSuffix); ok && !strings.HasPrefix(m.Path, "[") {
		m.Path, m.Deleted = p, true
	}
	return m, nil
}

var errBadDev = errors.New("want hex major:minor")

func checkDev(dev string) error {
	maj, min, ok := strings.Cut(dev, ":")
	if !ok {
		return fmt.Errorf("device %q: %w", dev, errBadDev)
	}
	if _, err := strconv.ParseUint(maj, 16, 32); err != nil {
		return fmt.Errorf("device %q: %w", dev, errBadDev)
	}
	if _, err := strconv.ParseUint(min, 16, 32); err != nil {
		return fmt.Errorf("device %q: %w", dev, errBadDev)
	}
	return nil
}
