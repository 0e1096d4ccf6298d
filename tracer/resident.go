package tracer

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// DefaultResidentBytes is the mean bytes of write faults between two
// sampled faults (--resident-bytes): one fault in 16. Sampling faults of
// 16 MiB then keeps ~256 pages, a standard error of ~6%; memtrace keeps
// ~1M pages for a 64 GiB process.
const DefaultResidentBytes = 64 << 10

// PageSize is the bytes each write fault counts (PAGE_SIZE in bpf/resident.h).
const PageSize = 4096

// AttachFaults attaches the page-fault programs (bpf/resident.h) as BTF
// tracepoints: no kprobes, no tracefs. Faults taken in user mode, and
// those the kernel takes copying into user memory (read(2)), are sampled;
// rss_stat reports the samples that made anonymous memory resident.
func (t *Objects) AttachFaults() error {
	if t.faultBytes == 0 {
		return errors.New("attach page-fault tracepoints: resident attribution is off")
	}
	// rss_stat first: a sample never waits for a program not there yet.
	for _, p := range []*ebpf.Program{t.objs.OnRssStat, t.objs.OnFaultUser, t.objs.OnFaultKernel} {
		l, err := link.AttachTracing(link.TracingOptions{Program: p})
		if err != nil {
			err = fmt.Errorf("attach tracepoint %s: %w", p, err)
			return errors.Join(err, t.DetachFaults())
		}
		t.faults = append(t.faults, l)
	}
	return nil
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
