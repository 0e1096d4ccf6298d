package tracer

import (
	"errors"
	"fmt"
	"sync/atomic"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"

	"github.com/memtrace/memtrace/internal/procfs"
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
	for _, name := range []string{"mt_rss_stat", "mt_page_alloc", "mt_fault_user", "mt_fault_kern"} {
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

// refaultBitsMin and refaultBitsMax bound log2 of refault_slots' size
// (REFAULT_SLOT_BITS_MAX in bpf/refault.h): 512 KiB to 32 MiB.
const (
	refaultBitsMin = 16
	refaultBitsMax = 22
)

// refaultBits is log2 of refault_slots' size: twice as many slots as the
// pages sampled if all of memBytes were made resident at one sample per
// residentBytes, so that fewer than two in five slots hold a sample even
// then (a fault in a slot that holds another page's sample writes a
// record memtrace drops).
func refaultBits(memBytes, residentBytes uint64) uint32 {
	want := 2 * memBytes / max(residentBytes, 1)
	bits := uint32(refaultBitsMin)
	for bits < refaultBitsMax && uint64(1)<<bits < want {
		bits++
	}
	return bits
}

// memTotal is the machine's memory (procfs.MemTotal), or 16 GiB when
// it cannot be read.
func memTotal() uint64 {
	if n, err := procfs.MemTotal(); err == nil {
		return n
	}
	return 16 << 30
}

// refaultSlot is the slot of pid's page at addr among 2^bits, as
// refault_index computes it: a 2 MiB region's pages in consecutive slots.
func refaultSlot(pid uint32, addr uint64, bits uint32) uint32 {
	region := ((addr >> 21) ^ uint64(pid)<<40) * 0x9E3779B97F4A7C15 >> (64 - bits)
	return uint32(region+(addr>>12)&511) & (1<<bits - 1)
}

// mapRefaultSlots maps refault_slots into memtrace, writable: user space
// counts the pages it uncharged there, and moves charges (atomically: the
// probes add to the same words).
func mapRefaultSlots(m *ebpf.Map) ([]byte, error) {
	b, err := unix.Mmap(m.FD(), 0, int(m.MaxEntries())*8, unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		return nil, fmt.Errorf("map refault_slots: %w", err)
	}
	return b, nil
}

// refaultCounts is slot i's struct refault_slot: charged, uncharged.
func (t *Objects) refaultCounts(i uint32) *[2]uint32 {
	return (*[2]uint32)(unsafe.Pointer(&t.refault[uint64(i)*8]))
}

// Uncharge tells the probes that pid's sampled page at addr left the
// table (unresident, faulted again, sampled again, or its process
// forgotten): its slot counts one sample fewer still charged, and a fault
// there need not be told while the slot holds no other (bpf/resident.h,
// tell_refault).
func (t *Objects) Uncharge(pid uint32, addr uint64) {
	if t.refault == nil {
		return
	}
	atomic.AddUint32(&t.refaultCounts(refaultSlot(pid, addr, t.refaultBits))[1], 1)
}

// MovePage tells the probes that pid's sampled page at from is now at to
// (mremap): its charge moves to to's slot, so that a refault there is
// told.
func (t *Objects) MovePage(pid uint32, from, to uint64) {
	if t.refault == nil {
		return
	}
	atomic.AddUint32(&t.refaultCounts(refaultSlot(pid, from, t.refaultBits))[1], 1)
	atomic.AddUint32(&t.refaultCounts(refaultSlot(pid, to, t.refaultBits))[0], 1)
}

// ResidentBytes is the mean of the fault sampling, 0 when it is off.
func (t *Objects) ResidentBytes() uint64 { return t.faultBytes }
