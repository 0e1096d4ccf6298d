package tracer

import (
	"errors"
	"fmt"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// AttachHost attaches the whole-host mode's raw tracepoints: process exec
// (to find new programs' allocators) and exit (to report and drop exited
// processes). Raw tracepoints need neither tracefs nor kprobes.
func (t *Objects) AttachHost() error {
	for _, tp := range []struct {
		name string
		prog *ebpf.Program
	}{{"sched_process_exec", t.objs.OnExec}, {"sched_process_exit", t.objs.OnExit}} {
		l, err := link.AttachRawTracepoint(link.RawTracepointOptions{Name: tp.name, Program: tp.prog})
		if err != nil {
			err = fmt.Errorf("attach raw tracepoint %s: %w", tp.name, err)
			return errors.Join(err, t.DetachHost())
		}
		t.host = append(t.host, l)
	}
	return nil
}

// DetachHost removes the raw tracepoints, if attached.
func (t *Objects) DetachHost() error {
	err := closeAll(t.host)
	t.host = nil
	return err
}

// Counts are a process's exact allocation counts in sampled mode.
type Counts struct {
	Allocs     uint64
	AllocBytes uint64
}

// Counts returns the exact per-process allocation counts that the BPF
// programs keep in sampled mode (nil when exact: then every call is an
// event and user space counts them).
func (t *Objects) Counts() (map[uint32]Counts, error) {
	if t.sampleBytes == 0 {
		return nil, nil
	}
	out := map[uint32]Counts{}
	var pid uint32
	var cs []memtraceAllocCounts
	it := t.objs.ProcCounts.Iterate()
	for it.Next(&pid, &cs) {
		out[pid] = sumCounts(cs)
	}
	if err := it.Err(); err != nil {
		return nil, fmt.Errorf("read allocation counts: %w", err)
	}
	return out, nil
}

// CountsOf returns pid's exact counts in sampled mode (false if none).
func (t *Objects) CountsOf(pid uint32) (Counts, bool) {
	if t.sampleBytes == 0 {
		return Counts{}, false
	}
	var cs []memtraceAllocCounts
	if err := t.objs.ProcCounts.Lookup(pid, &cs); err != nil {
		return Counts{}, false
	}
	return sumCounts(cs), true
}

// sumCounts adds up the CPUs' counts of a process.
func sumCounts(cs []memtraceAllocCounts) Counts {
	var c Counts
	for _, x := range cs {
		c.Allocs += x.Allocs
		c.AllocBytes += x.AllocBytes
	}
	return c
}

// ResetCounts zeroes pid's exact counts (after an exec the statistics
// restart).
func (t *Objects) ResetCounts(pid uint32) {
	if t.sampleBytes > 0 {
		_ = t.objs.ProcCounts.Delete(pid)
	}
}

// Forget deletes what the BPF maps hold about pid once it is gone: its
// counts, lost events and the sampled blocks at live (the addresses
// user space still holds live for it; nil when exact).
func (t *Objects) Forget(pid uint32, live []uint64) {
	_ = t.objs.LostByPid.Delete(pid)
	if t.sampleBytes == 0 {
		return
	}
	_ = t.objs.ProcCounts.Delete(pid)
	t.forgetSampled(pid, live)
}

// forgetSampled deletes pid's sampled blocks at addrs and returns how
// many were there. mt_forget_smpl (bpf/memtrace.bpf.c) deletes them, so
// that each one's count in the probes' filter drops too.
func (t *Objects) forgetSampled(pid uint32, addrs []uint64) int {
	t.forgetMu.Lock()
	defer t.forgetMu.Unlock()
	deleted := 0
	var b memtraceForgetBatch
	for len(addrs) > 0 {
		n := min(len(addrs), len(b.Addrs))
		b = memtraceForgetBatch{Pid: pid, N: uint32(n)}
		copy(b.Addrs[:], addrs[:n])
		addrs = addrs[n:]
		err := t.objs.ForgetBatches.Put(uint32(0), &b)
		if err == nil {
			_, err = t.objs.ForgetSampled.Run(&ebpf.RunOptions{})
		}
		if err == nil {
			err = t.objs.ForgetBatches.Lookup(uint32(0), &b)
		}
		if err != nil {
			// Not expected (the program loaded with the others): the blocks
			// are deleted from here, their filter counts stay.
			deleted += t.deleteSampled(pid, b.Addrs[:n])
			continue
		}
		deleted += int(b.Deleted)
	}
	return deleted
}

// deleteSampled deletes pid's sampled blocks at addrs from user space,
// leaving their counts in the filter (forgetSampled's fallback).
func (t *Objects) deleteSampled(pid uint32, addrs []uint64) int {
	n := 0
	for _, a := range addrs {
		if t.objs.Sampled.Delete(&memtraceSampleKey{Addr: a, Pid: pid}) == nil {
			n++
		}
	}
	return n
}

// SampledFilterCount is the sum of the counts in sampled mode's filter:
// one per sampled block the map holds, when every block forgotten was
// forgotten through forgetSampled (-v logs it at exit).
func (t *Objects) SampledFilterCount() (uint64, error) {
	if t.sampleBytes == 0 {
		return 0, nil
	}
	// In batches: the filter has SampledHints slots, and a lookup each
	// (Iterate) took seconds of system time at every sampled run's end.
	keys := make([]uint32, 1<<14)
	vals := make([]uint32, len(keys))
	var cursor ebpf.MapBatchCursor
	var sum uint64
	for {
		n, err := t.objs.SampledHint.BatchLookup(&cursor, keys, vals, nil)
		for _, v := range vals[:n] {
			sum += uint64(v)
		}
		if errors.Is(err, ebpf.ErrKeyNotExist) {
			break
		}
		if err != nil {
			return 0, fmt.Errorf("read the sampled filter: %w", err)
		}
	}
	return sum, nil
}

// Sweep deletes the entries of processes that are gone (alive reports
// false) from the per-process maps: what exits missed (an exit event lost
// in a full ring, a process that exited between two scans). It returns
// how many entries it deleted.
func (t *Objects) Sweep(alive func(pid uint32) bool) int {
	n := 0
	sweep := func(m *ebpf.Map, v any) {
		var dead []uint32
		var pid uint32
		it := m.Iterate()
		for it.Next(&pid, v) {
			if !alive(pid) {
				dead = append(dead, pid)
			}
		}
		for _, p := range dead {
			if m.Delete(p) == nil {
				n++
			}
		}
	}
	sweep(t.objs.LostByPid, new(uint64))
	if t.sampleBytes == 0 {
		return n
	}
	sweep(t.objs.ProcCounts, new([]memtraceAllocCounts))
	dead := map[uint32][]uint64{}
	var k memtraceSampleKey
	var v uint8
	it := t.objs.Sampled.Iterate()
	for it.Next(&k, &v) {
		if !alive(k.Pid) {
			dead[k.Pid] = append(dead[k.Pid], k.Addr)
		}
	}
	for pid, addrs := range dead {
		n += t.forgetSampled(pid, addrs)
	}
	return n
}

// SampledBlocks is how many sampled live blocks the BPF map holds now.
func (t *Objects) SampledBlocks() int {
	if t.sampleBytes == 0 {
		return 0
	}
	n := 0
	var k memtraceSampleKey
	var v uint8
	it := t.objs.Sampled.Iterate()
	for it.Next(&k, &v) {
		n++
	}
	return n
}

// ForgetBlocks deletes pid's sampled blocks at addrs (after an exec,
// whose new program starts with none), keeping its counts.
func (t *Objects) ForgetBlocks(pid uint32, addrs []uint64) {
	if t.sampleBytes > 0 {
		t.forgetSampled(pid, addrs)
	}
}

// LostOf returns how many of pid's events were lost.
func (t *Objects) LostOf(pid uint32) (uint64, bool) {
	var n uint64
	if err := t.objs.LostByPid.Lookup(pid, &n); err != nil {
		return 0, false
	}
	return n, true
}
