package bench

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"

	"github.com/memtrace/memtrace/internal/allocator"
	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/procfs"
)

// checkedBytes is how much of each function's start is compared: enough
// for every placement tracer.Place picks.
const checkedBytes = 32

// foreignProbes reports uprobes that another tracer placed without a PID
// filter (host-wide tracing: every process pays the trap, ours included).
// The machine is shared, and such a run makes "untraced" a lie. Such probes
// appear as int3 in every process's copy of the code, so a fresh mallocfree
// is started (waiting, so nothing of ours is attached) and the first bytes of
// malloc and free in its memory are compared with the file. It returns ""
// when they match.
func (r *runner) foreignProbes(ctx context.Context) (string, error) {
	w, err := startWaiting(ctx, r.mallocfree, "1", "1", "wait")
	if err != nil {
		return "", err
	}
	defer w.stop()
	pid := w.pid()
	mods, err := allocator.ForProcess(pid)
	if err != nil {
		return "", err
	}
	probes, err := allocator.Bind(mods)
	if err != nil {
		return "", err
	}
	maps, err := readMaps(pid)
	if err != nil {
		return "", err
	}
	mem, err := os.Open("/proc/" + strconv.Itoa(pid) + "/mem")
	if err != nil {
		return "", fmt.Errorf("check for foreign probes: %w", err)
	}
	defer mem.Close()
	var found []string
	for _, p := range probes {
		if p.Func != event.FuncMalloc && p.Func != event.FuncFree {
			continue
		}
		addr, ok := vaddr(maps, p)
		if !ok {
			continue
		}
		want, got := make([]byte, checkedBytes), make([]byte, checkedBytes)
		if err := readAt(p.Path, want, int64(p.Offset)); err != nil {
			return "", err
		}
		if _, err := mem.ReadAt(got, int64(addr)); err != nil {
			return "", fmt.Errorf("check for foreign probes: read %s in process %d: %w", p.Symbol, pid, err)
		}
		for i := range want {
			if want[i] != got[i] {
				found = append(found, fmt.Sprintf("%s+%d", p.Symbol, i))
			}
		}
	}
	return strings.Join(found, " "), nil
}

func readMaps(pid int) ([]procfs.Mapping, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/maps")
	if err != nil {
		return nil, fmt.Errorf("check for foreign probes: %w", err)
	}
	return procfs.ParseMaps(bytes.NewReader(b))
}

// vaddr is where the probe's file offset is mapped in the process.
func vaddr(maps []procfs.Mapping, p allocator.Probe) (uint64, bool) {
	for _, m := range maps {
		if m.Path != p.Module || !m.Executable() {
			continue
		}
		if p.Offset >= m.Offset && p.Offset+checkedBytes <= m.Offset+(m.End-m.Start) {
			return m.Start + p.Offset - m.Offset, true
		}
	}
	return 0, false
}

func readAt(path string, b []byte, off int64) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("check for foreign probes: %w", err)
	}
	defer f.Close()
	if _, err := f.ReadAt(b, off); err != nil {
		return fmt.Errorf("check for foreign probes: read %s: %w", path, err)
	}
	return nil
}

// guard runs one measurement between two checks for foreign probes and
// says whether either found some (then the sample is tainted). A failed
// check counts as clean: it must not sink the measurement.
func (r *runner) guard(ctx context.Context, measure func() error) (tainted string, err error) {
	before, _ := r.foreignProbes(ctx)
	err = measure()
	after, _ := r.foreignProbes(ctx)
	switch {
	case before != "":
		return before, err
	case after != "":
		return after, err
	}
	return "", err
}
