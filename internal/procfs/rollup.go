package procfs

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
)

// ReadRollupPSS reads pid's proportional set size from
// /proc/PID/smaps_rollup: one walk of its page tables, nothing per mapping
// written out (a process gone matches os.ErrNotExist).
func ReadRollupPSS(pid int) (uint64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/smaps_rollup")
	if err != nil {
		return 0, goneOr(err)
	}
	return ParseRollupPSS(b)
}

// ParseRollupPSS finds "Pss:  1234 kB" in smaps_rollup's text.
func ParseRollupPSS(b []byte) (uint64, error) {
	for len(b) > 0 {
		var line []byte
		line, b, _ = bytes.Cut(b, []byte{'\n'})
		if rest, ok := bytes.CutPrefix(line, []byte("Pss:")); ok {
			kb, err := kbField(rest)
			if err != nil {
				return 0, fmt.Errorf("smaps_rollup: Pss: %w", err)
			}
			return kb << 10, nil
		}
	}
	return 0, errors.New("smaps_rollup: no Pss line")
}
