package bench

import (
	"context"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/cilium/ebpf/link"

	"github.com/memtrace/memtrace/internal/allocator"
	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/launch"
	"github.com/memtrace/memtrace/internal/tracer"
)

// rowNodeTraps is node -e 0 with an empty program wherever memtrace puts
// its probes in node (every allocator function's entry, and the return of
// each but free's), attached at its exec stop: the traps alone, node's own
// floor, with none of memtrace's work in or out of the kernel.
const rowNodeTraps = "empty programs at memtrace's probes"

// nodeUnderTraps runs node with args under rowNodeTraps's programs and
// returns its wall time from start to exit, attaching included.
func (r *runner) nodeUnderTraps(ctx context.Context, node string, args ...string) (time.Duration, error) {
	e, err := r.emptyProgram()
	if err != nil {
		return 0, err
	}
	start := time.Now()
	child, err := launch.Start(launch.Spec{Args: append([]string{node}, args...), Env: os.Environ()})
	if err != nil {
		return 0, err
	}
	var links []link.Link
	defer func() { closeLinks(links) }()
	var attachErr error
	for st := range child.Stops {
		if st.Kind == launch.Exec && attachErr == nil {
			links, attachErr = attachEverywhere(e, st.PID, node)
			if attachErr != nil {
				syscall.Kill(st.PID, syscall.SIGKILL)
			}
		}
		st.Resume()
	}
	select {
	case <-child.Done:
	case <-ctx.Done():
		return 0, ctx.Err()
	}
	return time.Since(start), attachErr
}

// attachEverywhere places e as memtrace places its allocator probes in pid,
// a command stopped at its exec: entries, and returns but free's.
func attachEverywhere(e *emptyProbe, pid int, exe string) ([]link.Link, error) {
	mods, err := allocator.ForCommand(exe, os.Environ())
	if err != nil {
		return nil, err
	}
	probes, err := allocator.Bind(mods)
	if err != nil {
		return nil, err
	}
	var links []link.Link
	for _, p := range tracer.Place(probes) {
		ex, err := link.OpenExecutable(p.Path)
		if err != nil {
			return links, fmt.Errorf("open %s: %w", p.Module, err)
		}
		if p.Func != event.FuncFree {
			l, err := ex.Uretprobe(p.Symbol, e.prog, &link.UprobeOptions{PID: pid, Address: p.Offset})
			if err != nil {
				return links, fmt.Errorf("attach uretprobe %s: %w", p.Symbol, err)
			}
			links = append(links, l)
		}
		l, err := ex.Uprobe(p.Symbol, e.prog, &link.UprobeOptions{PID: pid, Address: p.Offset + uint64(p.Skip)})
		if err != nil {
			return links, fmt.Errorf("attach uprobe %s: %w", p.Symbol, err)
		}
		links = append(links, l)
	}
	return links, nil
}
