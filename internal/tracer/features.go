package tracer

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/asm"
	"github.com/cilium/ebpf/btf"
	"github.com/cilium/ebpf/features"
	"golang.org/x/sys/unix"
)

// ErrOldKernel: the kernel lacks a BPF feature memtrace cannot do without.
// The error's text names the feature and the Linux version that brought it.
var ErrOldKernel = errors.New("unsupported kernel")

// AttachPath is how the probes are attached.
type AttachPath string

const (
	// AttachMulti: one uprobe_multi link per file for the entry probes
	// and one for the return probes (Linux 6.6+).
	AttachMulti AttachPath = "multi"
	// AttachPerProbe: one classic uprobe or uretprobe link per function
	// (a perf event each), the function named by the link's cookie.
	AttachPerProbe AttachPath = "per-probe"
	// AttachSession: sampled mode on Linux 6.13+: AttachMulti, but the
	// allocating functions get one uprobe session link per file, whose
	// entry skips the return of a call that is not sampled (session.go).
	AttachSession AttachPath = "session"
)

// Feature is one thing memtrace asks of the kernel.
type Feature struct {
	// ID names it in MEMTRACE_KERNEL_LACKS.
	ID string
	// Name is what the refusal message and -v call it.
	Name string
	// Since is the first Linux release that has it.
	Since string
	// Essential: without it memtrace refuses to run. The others have a
	// fallback.
	Essential bool
	have      func() error
}

// KernelFeatures lists what memtrace probes for, in the order it checks
// them (docs/kernels.md's table of supported kernels follows it).
var KernelFeatures = []Feature{
	{ID: "btf", Name: "BTF", Since: "5.4", Essential: true, have: haveBTF},
	{ID: "raw_tracepoint", Name: "raw tracepoints", Since: "4.17", Essential: true, have: func() error { return features.HaveProgramType(ebpf.RawTracepoint) }},
	{ID: "ringbuf", Name: "ring buffer", Since: "5.8", Essential: true, have: func() error { return features.HaveMapType(ebpf.RingBuf) }},
	{ID: "current_task_btf", Name: "bpf_get_current_task_btf", Since: "5.11", Essential: true, have: kprobeHelper(asm.FnGetCurrentTaskBtf)},
	{ID: "task_storage", Name: "task storage in tracing programs", Since: "5.13", Essential: true, have: kprobeHelper(asm.FnTaskStorageGet)},
	{ID: "attach_cookie", Name: "bpf_get_attach_cookie", Since: "5.15", Essential: true, have: kprobeHelper(asm.FnGetAttachCookie)},
	// The stack walk that charges wrappers' callers and unwinds --detail stacks.
	{ID: "find_vma", Name: "bpf_find_vma", Since: "5.17", Essential: true, have: kprobeHelper(asm.FnFindVma)},
	{ID: "loop", Name: "bpf_loop", Since: "5.17", Essential: true, have: kprobeHelper(asm.FnLoop)},
	{ID: featUprobeMulti, Name: "uprobe_multi links", Since: "6.6", have: features.HaveBPFLinkUprobeMulti},
	// Sampled mode's one-trap path for calls not sampled.
	{ID: featUprobeSession, Name: "uprobe sessions", Since: "6.13", have: haveUprobeSession},
	{ID: featExitGroupDead, Name: "group_dead in sched_process_exit", Since: "after 6.12", have: haveExitGroupDead},
}

// IDs of the features with a fallback (KernelFeatures).
const (
	featUprobeMulti   = "uprobe_multi"
	featUprobeSession = "uprobe_session"
	featExitGroupDead = "exit_group_dead"
)

// MinKernel is the oldest Linux that has every essential feature.
const MinKernel = "5.17"

// lacksEnv names features to treat as missing, comma-separated (by ID,
// or "all"): it lets tests take the fallbacks, and the refusal, on a
// kernel that has everything.
const lacksEnv = "MEMTRACE_KERNEL_LACKS"

// Kernel is what the running kernel offers, as probed once at start.
type Kernel struct {
	// Release is uname's release ("6.1.0-56-amd64").
	Release string
	// Missing lists the features it lacks.
	Missing []Feature
	// Attach is the attach path memtrace takes on it (in sampled mode,
	// once loaded: AttachSession where sessions exists).
	Attach AttachPath
	// sessions: the kernel has uprobe sessions.
	sessions bool
	// exitGroupDead: sched_process_exit passes group_dead.
	exitGroupDead bool
}

var (
	probeOnce sync.Once
	probed    Kernel
	probeErr  error
)

// ProbeKernel probes the running kernel's features (once per process). It
// returns ErrOldKernel, with one line naming the first missing essential
// feature and the release that brings it, when memtrace cannot run.
func ProbeKernel() (Kernel, error) {
	probeOnce.Do(func() { probed, probeErr = probeKernel(lacking(os.Getenv(lacksEnv))) })
	return probed, probeErr
}

func probeKernel(lacks func(string) bool) (Kernel, error) {
	k := Kernel{Release: release()}
	for _, f := range KernelFeatures {
		err := f.have()
		if lacks(f.ID) {
			err = ebpf.ErrNotSupported
		}
		switch {
		case err == nil:
		case errors.Is(err, ebpf.ErrNotSupported):
			k.Missing = append(k.Missing, f)
		case errors.Is(err, os.ErrPermission), errors.Is(err, unix.EPERM):
			return k, fmt.Errorf("probe %s: %w", f.Name, ErrPermission)
		default:
			return k, fmt.Errorf("probe kernel feature %s: %w", f.Name, err)
		}
	}
	k.Attach, k.exitGroupDead, k.sessions = AttachMulti, true, true
	for _, f := range k.Missing {
		switch {
		case f.Essential:
			return k, fmt.Errorf("%w: %s lacks %s (Linux %s); memtrace needs Linux %s or later",
				ErrOldKernel, k.Release, f.Name, f.Since, MinKernel)
		case f.ID == featUprobeMulti:
			k.Attach, k.sessions = AttachPerProbe, false
		case f.ID == featUprobeSession:
			k.sessions = false
		case f.ID == featExitGroupDead:
			k.exitGroupDead = false
		}
	}
	return k, nil
}

// lacking parses MEMTRACE_KERNEL_LACKS.
func lacking(env string) func(string) bool {
	set := map[string]bool{}
	for _, n := range strings.Split(env, ",") {
		set[strings.TrimSpace(n)] = true
	}
	return func(id string) bool { return set[id] || set["all"] }
}

func release() string {
	var u unix.Utsname
	if err := unix.Uname(&u); err != nil {
		return "unknown"
	}
	return unix.ByteSliceToString(u.Release[:])
}

// kprobeHelper probes whether kprobe (and so uprobe) programs may call fn.
func kprobeHelper(fn asm.BuiltinFunc) func() error {
	return func() error { return features.HaveProgramHelper(ebpf.Kprobe, fn) }
}

func haveBTF() error {
	if _, err := os.Stat("/sys/kernel/btf/vmlinux"); err != nil {
		return ebpf.ErrNotSupported
	}
	return nil
}

// haveExitGroupDead reads the tracepoint's prototype from the kernel's BTF:
// btf_trace_sched_process_exit is (void *, struct task_struct *[, bool]).
func haveExitGroupDead() error {
	spec, err := kernelBTF().Kernel()
	if err != nil {
		return ebpf.ErrNotSupported
	}
	var td *btf.Typedef
	if err := spec.TypeByName("btf_trace_sched_process_exit", &td); err != nil {
		return ebpf.ErrNotSupported
	}
	ptr, ok := td.Type.(*btf.Pointer)
	if !ok {
		return ebpf.ErrNotSupported
	}
	proto, ok := ptr.Target.(*btf.FuncProto)
	if !ok || len(proto.Params) < 3 {
		return ebpf.ErrNotSupported
	}
	return nil
}

// adapt sets what the kernel decides in the spec before it is loaded.
func (k Kernel) adapt(spec *ebpf.CollectionSpec) error {
	if k.Attach == AttachPerProbe {
		// Classic uprobe links take programs loaded without the
		// uprobe_multi attach type; bpf_get_attach_cookie then reads the
		// perf event link's cookie.
		for _, name := range []string{"mt_alloc_entry", "mt_jvm_entry", "mt_alloc_ret"} {
			spec.Programs[name].AttachType = ebpf.AttachNone
		}
	}
	if !k.exitGroupDead {
		if err := spec.Variables["exit_has_group_dead"].Set(uint8(0)); err != nil {
			return fmt.Errorf("set exit_has_group_dead: %w", err)
		}
	}
	return nil
}

// AttachFor is the attach path a run with sampleBytes takes here
// (Options.SampleBytes): AttachSession in sampled mode where the kernel
// has uprobe sessions, k.Attach otherwise.
func (k Kernel) AttachFor(sampleBytes uint64) AttachPath {
	if sampleBytes > 0 && k.Attach == AttachMulti && k.sessions {
		return AttachSession
	}
	return k.Attach
}

// Kernel returns what the running kernel offers, as probed by Load.
func (t *Objects) Kernel() Kernel { return t.kernel }

// Lacks names the missing features, for -v ("" when none is missing).
func (k Kernel) Lacks() string {
	names := make([]string, len(k.Missing))
	for i, f := range k.Missing {
		names[i] = f.Name + " (" + f.Since + ")"
	}
	return strings.Join(names, ", ")
}

// The kernel's BTF, decoded once for the feature probe and the load that
// follows (~25 ms of CPU each time on 6.18's), then dropped: its types
// take a few MB that nothing needs once the programs are loaded.
var (
	kernelTypesMu sync.Mutex
	kernelTypes   *btf.Cache
)

// kernelBTF is the cache of the kernel's BTF, made anew after a drop.
func kernelBTF() *btf.Cache {
	kernelTypesMu.Lock()
	defer kernelTypesMu.Unlock()
	if kernelTypes == nil {
		kernelTypes = btf.NewCache()
	}
	return kernelTypes
}

// dropKernelBTF lets the collector have the decoded types.
func dropKernelBTF() {
	kernelTypesMu.Lock()
	defer kernelTypesMu.Unlock()
	kernelTypes = nil
}
