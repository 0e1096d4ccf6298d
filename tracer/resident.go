package tracer

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// DefaultResidentBytes is the mean bytes made resident by faults between
// two sampled faults (--resident-bytes): one 4 KiB fault in 16, every
// fault that maps a 2 MiB huge page. Sampling faults of
// 16 MiB then keeps ~256 pages, a standard error of ~6%; memtrace keeps
// ~1M pages for a 64 GiB process.
const DefaultResidentBytes = 64 << 10

// PageSize is the bytes of a page (PAGE_SIZE in bpf/resident.h): a fault
// maps one, or a folio of several (a huge page).
const PageSize = 4096

// AttachFaults attaches the page-fault programs (bpf/resident.h) as BTF
// tracepoints: no kprobes, no tracefs. Faults taken in user mode, and
// those the kernel takes copying into user memory (read(2)), are sampled;
// rss_stat samples those that made anonymous memory resident, by the size
// of the folio mm_page_alloc saw them allocate.
func (t *Objects) AttachFaults() error {
	if t.faultBytes == 0 {
		return errors.New("attach page-fault tracepoints: resident attribution is off")
	}
	// rss_stat and the folio's size first: a fault never waits for a
	// program not there yet.
	progs := []*ebpf.Program{t.objs.OnRssStat, t.objs.OnPageAlloc, t.objs.OnFaultUser, t.objs.OnFaultKernel}
	// (FaultTracepoints names the same programs.)
	for _, p := range progs {
		l, err := link.AttachTracing(link.TracingOptions{Program: p})
		if err != nil {
			err = fmt.Errorf("attach tracepoint %s: %w", p, err)
			return errors.Join(err, t.DetachFaults())
		}
		t.faults = append(t.faults, l)
	}
	return nil
}

// FaultTracepoints returns the tracepoints AttachFaults attaches to, read
// from the programs' sections (make bench's floor attaches empty programs
// there).
func FaultTracepoints() ([]string, error) {
	spec, err := loadMemtrace()
	if err != nil {
		return nil, fmt.Errorf("load BPF spec: %w", err)
	}
	var tps []string
	for _, name := range []string{"on_rss_stat", "on_page_alloc", "on_fault_user", "on_fault_kernel"} {
		p := spec.Programs[name]
		if p == nil {
			return nil, fmt.Errorf("no program %s in the BPF object", name)
		}
		tps = append(tps, p.AttachTo)
	}
	return tps, nil
}

// DetachFaults removes the page-fault programs, if attached.
func (t *Objects) DetachFaults() error {
	err := closeAll(t.faults)
	t.faults = nil
	return err
}

// TraceFaults adds pid to the processes whose faults are sampled (-p and
// --: the tracepoints fire for every process on the host).
func (t *Objects) TraceFaults(pid uint32) error {
	if err := t.objs.FaultPids.Put(pid, uint8(1)); err != nil {
		return fmt.Errorf("trace faults of %d: %w", pid, err)
	}
	return nil
}

// UntraceFaults removes pid from the processes whose faults are sampled.
func (t *Objects) UntraceFaults(pid uint32) {
	_ = t.objs.FaultPids.Delete(pid)
}

// ResidentBytes is the mean of the fault sampling, 0 when it is off.
func (t *Objects) ResidentBytes() uint64 { return t.faultBytes }
