package bench

import (
	"errors"
	"fmt"
	"strings"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/link"

	"github.com/memtrace/memtrace/internal/allocator"
	"github.com/memtrace/memtrace/internal/event"
	"github.com/memtrace/memtrace/internal/tracer"
)

// emptyProbe is a BPF program that returns at once: attached where memtrace
// attaches, it costs what the trap costs and nothing more, which is the
// floor any uprobe-based tracer pays.
type emptyProbe struct {
	prog *ebpf.Program
}

func loadEmptyProbe() (*emptyProbe, error) {
	prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
		Name:         "membench_empty",
		Type:         ebpf.Kprobe,
		License:      "GPL",
		Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
	})
	if err != nil {
		return nil, fmt.Errorf("load empty BPF program: %w", err)
	}
	return &emptyProbe{prog: prog}, nil
}

func (e *emptyProbe) Close() error { return e.prog.Close() }

// attach places the empty program as memtrace would on malloc (entry and
// return) and free (entry) of pid, and nothing else: the loop calls only
// those. best uses tracer.Place's offsets; otherwise every probe sits at +0,
// as bcc's memleak and bpftrace put them. It returns the links to close and
// a description of where the probes went. Without returns, malloc gets no
// return probe (the two-trap floor).
func (e *emptyProbe) attach(pid int, best, returns bool) ([]link.Link, string, error) {
	mods, err := allocator.ForProcess(pid)
	if err != nil {
		return nil, "", err
	}
	probes, err := allocator.Bind(mods)
	if err != nil {
		return nil, "", err
	}
	var wanted []allocator.Probe
	for _, p := range probes {
		if p.Func == event.FuncMalloc || p.Func == event.FuncFree {
			wanted = append(wanted, p)
		}
	}
	placed := tracer.Place(wanted)
	var links []link.Link
	var where []string
	fail := func(err error) ([]link.Link, string, error) {
		closeLinks(links)
		return nil, "", err
	}
	for _, p := range placed {
		skip := p.Skip
		if !best {
			skip = 0
		}
		ex, err := link.OpenExecutable(p.Path)
		if err != nil {
			return fail(fmt.Errorf("open %s: %w", p.Module, err))
		}
		opts := &link.UprobeOptions{PID: pid, Address: p.Offset + uint64(skip)}
		// The return probe goes in first, as tracer.Attach does.
		if p.Func == event.FuncMalloc && returns {
			l, err := ex.Uretprobe(p.Symbol, e.prog, opts)
			if err != nil {
				return fail(fmt.Errorf("attach uretprobe %s: %w", p.Symbol, err))
			}
			links = append(links, l)
		}
		l, err := ex.Uprobe(p.Symbol, e.prog, opts)
		if err != nil {
			return fail(fmt.Errorf("attach uprobe %s: %w", p.Symbol, err))
		}
		links = append(links, l)
		where = append(where, fmt.Sprintf("%s+%d", p.Symbol, skip))
	}
	if len(where) != 2 {
		return fail(fmt.Errorf("process %d: found %d of malloc and free", pid, len(where)))
	}
	return links, strings.Join(where, " "), nil
}

// closeLinks detaches entry probes before return probes (the reverse of
// attach order).
func closeLinks(links []link.Link) error {
	var errs []error
	for i := len(links) - 1; i >= 0; i-- {
		if err := links[i].Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// attachEmptyFaultPrograms attaches a program that returns at once to each
// tracepoint resident attribution attaches (tracer.FaultTracepoints): what
// the kernel's dispatch of those tracepoints costs a fault, with none of
// memtrace's work, the floor of any design on the same tracepoints.
func attachEmptyFaultPrograms(tracepoints []string) ([]link.Link, error) {
	var links []link.Link
	for _, tp := range tracepoints {
		prog, err := ebpf.NewProgram(&ebpf.ProgramSpec{
			Name:         "membench_empty",
			Type:         ebpf.Tracing,
			AttachType:   ebpf.AttachTraceRawTp,
			AttachTo:     tp,
			License:      "GPL",
			Instructions: asm.Instructions{asm.Mov.Imm(asm.R0, 0), asm.Return()},
		})
		if err != nil {
			closeLinks(links)
			return nil, fmt.Errorf("load empty program for tracepoint %s: %w", tp, err)
		}
		l, err := link.AttachTracing(link.TracingOptions{Program: prog})
		prog.Close() // the link holds it
		if err != nil {
			closeLinks(links)
			return nil, fmt.Errorf("attach empty program to tracepoint %s: %w", tp, err)
		}
		links = append(links, l)
	}
	return links, nil
}
