package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
)

// ErrNoMemory: the process has no memory of its own to read (a kernel
// thread, or a zombie whose memory is gone).
var ErrNoMemory = errors.New("no RssAnon, RssFile and RssShmem")

// Status is what memtrace reads of /proc/PID/status: the resident bytes
// by kind, and the bytes swapped out (VmSwap; 0 where the kernel has no
// swap accounting).
type Status struct {
	RssAnon, RssFile, RssShmem uint64
	VmSwap                     uint64
}

// ParseStatus parses the text of /proc/PID/status.
func ParseStatus(b []byte) (Status, error) {
	var st Status
	found := 0
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte{'\n'})
		key, rest, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			continue
		}
		var dst *uint64
		optional := false
		switch string(key) {
		case "RssAnon":
			dst = &st.RssAnon
		case "RssFile":
			dst = &st.RssFile
		case "RssShmem":
			dst = &st.RssShmem
		case "VmSwap":
			dst, optional = &st.VmSwap, true
		default:
			continue
		}
		kb, err := kbField(rest)
		if err != nil {
			return Status{}, fmt.Errorf("status: %s: %w", key, err)
		}
		*dst = kb << 10
		if !optional {
			found++
		}
	}
	if found != 3 {
		return Status{}, fmt.Errorf("status: %w", ErrNoMemory)
	}
	return st, nil
}

// ReadStatus reads pid's status (a process gone matches os.ErrNotExist).
func ReadStatus(pid int) (Status, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return Status{}, goneOr(err)
	}
	return ParseStatus(b)
}

// MemTotal returns the machine's memory in bytes: /proc/meminfo's MemTotal.
func MemTotal() (uint64, error) {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0, err
	}
	_, rest, ok := bytes.Cut(b, []byte("MemTotal:"))
	if !ok {
		return 0, errors.New("meminfo: no MemTotal")
	}
	line, _, _ := bytes.Cut(rest, []byte{'\n'})
	kb, err := kbField(line)
	if err != nil {
		return 0, fmt.Errorf("meminfo: MemTotal: %w", err)
	}
	return kb << 10, nil
}

// StatusFields reads the fields of a /proc/PID/status that dst names
// ("VmRSS:\t  1234 kB") into them, in bytes, and returns how many it
// found.
func StatusFields(b []byte, dst map[string]*uint64) (int, error) {
	found := 0
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte{'\n'})
		key, rest, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			continue
		}
		d := dst[string(key)]
		if d == nil {
			continue
		}
		kb, err := kbField(rest)
		if err != nil {
			return found, fmt.Errorf("status: %s: %w", key, err)
		}
		*d = kb << 10
		found++
	}
	return found, nil
}
