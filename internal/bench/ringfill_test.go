package bench

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"

	"github.com/memtrace/memtrace/internal/event"
)

// ringFiller writes struct event records into a real BPF ring buffer from
// the kernel side, so that the consumer benchmark reads them through the
// same mmap'ed ring and cilium reader as memtrace. Uprobe programs cannot be
// test-run, so a socket filter does the writing: each run outputs the next
// record of a cycle stored in an array map (bpf_ringbuf_output, no wakeup).
type ringFiller struct {
	Ring     *ebpf.Map
	records  *ebpf.Map
	counter  *ebpf.Map
	prog     *ebpf.Program
	capacity int // records the ring holds
}

// newRingFiller loads a ring of ringBytes and the cycle of events (its
// length must be a power of two).
func newRingFiller(ringBytes int, cycle []event.Event) (f *ringFiller, err error) {
	n := len(cycle)
	if n == 0 || n&(n-1) != 0 {
		return nil, fmt.Errorf("cycle of %d events: must be a power of two", n)
	}
	f = &ringFiller{capacity: ringBytes / (recordSize + 8)}
	defer func() {
		if err != nil {
			f.Close()
		}
	}()
	if f.Ring, err = ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.RingBuf, MaxEntries: uint32(ringBytes)}); err != nil {
		return nil, fmt.Errorf("create ring buffer: %w", err)
	}
	if f.records, err = ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: uint32(recordSize), MaxEntries: uint32(n)}); err != nil {
		return nil, fmt.Errorf("create record map: %w", err)
	}
	if f.counter, err = ebpf.NewMap(&ebpf.MapSpec{Type: ebpf.Array, KeySize: 4, ValueSize: 8, MaxEntries: 1}); err != nil {
		return nil, fmt.Errorf("create counter map: %w", err)
	}
	b := make([]byte, recordSize)
	for i, e := range cycle {
		encodeRecord(b, e)
		if err := f.records.Put(uint32(i), b); err != nil {
			return nil, fmt.Errorf("store record %d: %w", i, err)
		}
	}
	const noWakeup = 1 // BPF_RB_NO_WAKEUP
	insns := asm.Instructions{
		// i = counter[0]++
		asm.StoreImm(asm.RFP, -4, 0, asm.Word),
		asm.LoadMapPtr(asm.R1, f.counter.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -4),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		asm.LoadMem(asm.R7, asm.R0, 0, asm.DWord),
		asm.Mov.Reg(asm.R8, asm.R7),
		asm.Add.Imm(asm.R8, 1),
		asm.StoreMem(asm.R0, 0, asm.R8, asm.DWord),
		// rec = records[i % n]
		asm.And.Imm(asm.R7, int32(n-1)),
		asm.StoreMem(asm.RFP, -8, asm.R7, asm.Word),
		asm.LoadMapPtr(asm.R1, f.records.FD()),
		asm.Mov.Reg(asm.R2, asm.RFP),
		asm.Add.Imm(asm.R2, -8),
		asm.FnMapLookupElem.Call(),
		asm.JEq.Imm(asm.R0, 0, "out"),
		// bpf_ringbuf_output(ring, rec, 64, BPF_RB_NO_WAKEUP)
		asm.LoadMapPtr(asm.R1, f.Ring.FD()),
		asm.Mov.Reg(asm.R2, asm.R0),
		asm.Mov.Imm(asm.R3, int32(recordSize)),
		asm.Mov.Imm(asm.R4, noWakeup),
		asm.FnRingbufOutput.Call(),
		asm.Mov.Imm(asm.R0, 0).WithSymbol("out"),
		asm.Return(),
	}
	f.prog, err = ebpf.NewProgram(&ebpf.ProgramSpec{Name: "membench_fill", Type: ebpf.SocketFilter, License: "GPL", Instructions: insns})
	if err != nil {
		return nil, fmt.Errorf("load ring filler: %w", err)
	}
	return f, nil
}

// fill writes the next n records of the cycle into the ring.
func (f *ringFiller) fill(n int) error {
	if n > f.capacity {
		return fmt.Errorf("fill %d records: the ring holds %d", n, f.capacity)
	}
	// Socket filters need at least an Ethernet header of input.
	if _, err := f.prog.Run(&ebpf.RunOptions{Data: make([]byte, 64), Repeat: uint32(n)}); err != nil {
		return fmt.Errorf("run ring filler: %w", err)
	}
	return nil
}

func (f *ringFiller) Close() error {
	var errs []error
	if f.prog != nil {
		errs = append(errs, f.prog.Close())
	}
	for _, m := range []*ebpf.Map{f.Ring, f.records, f.counter} {
		if m != nil {
			errs = append(errs, m.Close())
		}
	}
	return errors.Join(errs...)
}
