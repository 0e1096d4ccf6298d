// Package tracer loads memtrace's BPF objects, attaches them to the allocator
// of each target process and drains the events they write. It knows nothing
// of statistics or symbols: it hands plain event.Events to its caller.
package tracer

import (
	"encoding/binary"
	"errors"
	"fmt"
	"os"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// Sentinel errors callers branch on (exit codes, messages).
var (
	// ErrPermission: not root, or lacking CAP_BPF/CAP_PERFMON.
	ErrPermission = errors.New("permission denied: memtrace needs root (or CAP_BPF and CAP_PERFMON)")
	// ErrNoBTF: the kernel exposes no BTF (/sys/kernel/btf/vmlinux).
	ErrNoBTF = errors.New("kernel has no BTF (/sys/kernel/btf/vmlinux missing): CONFIG_DEBUG_INFO_BTF is required")
	// ErrNoUprobes: the kernel cannot attach uprobes.
	ErrNoUprobes = errors.New("kernel cannot attach uprobe_multi links: memtrace needs Linux 6.6 or later with CONFIG_UPROBES")
)

// Options tune the BPF side.
type Options struct {
	// RingBytes is the ring buffer's size, a power of two ≥ the page size.
	RingBytes int
	// WakeupBytes: the reader is woken only when this much data waits;
	// otherwise it finds the data on its next poll.
	WakeupBytes int
	// StackDepth > 0 takes a user stack of at most that many frames at each
	// outermost allocation (--detail).
	StackDepth int
}

// MaxStackDepth is the kernel's limit for one stack (perf_event_max_stack).
const MaxStackDepth = 127

// DefaultOptions suit this machine's heaviest benchmark load.
func DefaultOptions() Options {
	return Options{RingBytes: 64 << 20, WakeupBytes: 4 << 20}
}

// Objects are the loaded programs and maps.
type Objects struct {
	objs memtraceObjects
}

// Load checks the kernel's prerequisites and loads the BPF objects.
func Load(o Options) (*Objects, error) {
	if os.Geteuid() != 0 {
		return nil, ErrPermission
	}
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		return nil, ErrNoBTF
	}
	if o.RingBytes <= 0 || o.RingBytes&(o.RingBytes-1) != 0 || o.RingBytes < os.Getpagesize() {
		return nil, fmt.Errorf("ring buffer size %d: must be a power of two of at least %d", o.RingBytes, os.Getpagesize())
	}
	spec, err := loadMemtrace()
	if err != nil {
		return nil, fmt.Errorf("load BPF object: %w", err)
	}
	spec.Maps["events"].MaxEntries = uint32(o.RingBytes)
	if err := spec.Variables["wakeup_bytes"].Set(uint64(o.WakeupBytes)); err != nil {
		return nil, fmt.Errorf("set wakeup_bytes: %w", err)
	}
	if o.StackDepth > MaxStackDepth {
		return nil, fmt.Errorf("stack depth %d: at most %d", o.StackDepth, MaxStackDepth)
	}
	if o.StackDepth > 0 {
		if err := spec.Variables["capture_stacks"].Set(uint8(1)); err != nil {
			return nil, fmt.Errorf("set capture_stacks: %w", err)
		}
		// The kernel collects as many frames as a value holds.
		spec.Maps["stacks"].ValueSize = uint32(o.StackDepth * 8)
	} else {
		spec.Maps["stacks"].MaxEntries = 1
	}
	t := Objects{}
	if err := spec.LoadAndAssign(&t.objs, nil); err != nil {
		if errors.Is(err, os.ErrPermission) {
			return nil, fmt.Errorf("%w: %w", ErrPermission, err)
		}
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("load BPF programs: verifier: %+v", ve)
		}
		return nil, fmt.Errorf("load BPF programs: %w", err)
	}
	return &t, nil
}

// Close releases the programs and maps. Attachments must be detached first.
func (t *Objects) Close() error {
	return t.objs.Close()
}

// Lost returns the events the kernel could not hand over, per process and in total.
func (t *Objects) Lost() (map[uint32]uint64, uint64, error) {
	per := map[uint32]uint64{}
	var pid uint32
	var n uint64
	it := t.objs.LostByPid.Iterate()
	for it.Next(&pid, &n) {
		per[pid] = n
	}
	if err := it.Err(); err != nil {
		return nil, 0, fmt.Errorf("read lost events: %w", err)
	}
	var percpu []uint64
	if err := t.objs.LostTotal.Lookup(uint32(0), &percpu); err != nil {
		return nil, 0, fmt.Errorf("read lost events: %w", err)
	}
	var total uint64
	for _, v := range percpu {
		total += v
	}
	return per, total, nil
}

// Stack returns the frames of a user stack taken by the probes, innermost
// first (the first is the probed function itself).
func (t *Objects) Stack(id int32) ([]uint64, error) {
	if id < 0 {
		return nil, nil
	}
	b, err := t.objs.Stacks.LookupBytes(uint32(id))
	if err != nil {
		return nil, fmt.Errorf("read stack %d: %w", id, err)
	}
	var frames []uint64
	for i := 0; i+8 <= len(b); i += 8 {
		pc := binary.NativeEndian.Uint64(b[i:])
		if pc == 0 {
			break
		}
		frames = append(frames, pc)
	}
	return frames, nil
}

// isNotSupported reports whether err says the kernel lacks a feature.
func isNotSupported(err error) bool {
	return errors.Is(err, ebpf.ErrNotSupported) || errors.Is(err, link.ErrNotSupported)
}
