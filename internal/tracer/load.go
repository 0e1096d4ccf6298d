// Package tracer loads memtrace's BPF objects, attaches them to the allocator
// of each target process and drains the events they write. It knows nothing
// of statistics or symbols: it hands plain event.Events to its caller.
package tracer

import (
	"cmp"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/internal/diskcache"
)

// Sentinel errors callers branch on (exit codes, messages).
var (
	// ErrPermission: not root, or lacking CAP_BPF/CAP_PERFMON.
	ErrPermission = errors.New("permission denied: memtrace needs root (or CAP_BPF and CAP_PERFMON)")
	// ErrNoBTF: the kernel exposes no BTF (/sys/kernel/btf/vmlinux).
	ErrNoBTF = errors.New("kernel has no BTF (/sys/kernel/btf/vmlinux missing): CONFIG_DEBUG_INFO_BTF is required")
	// ErrNoUprobes: the kernel cannot attach uprobes.
	ErrNoUprobes = errors.New("kernel cannot attach uprobes: memtrace needs CONFIG_UPROBES")
)

// Options tune the BPF side.
type Options struct {
	// RingBytes is the ring buffer's size, a power of two ≥ the page size.
	RingBytes int
	// WakeupBytes: the reader is woken only when this much data waits;
	// otherwise it finds the data on its next poll.
	WakeupBytes int
	// StackDepth > 0 unwinds a user stack of at most that many frames,
	// from the charged call site on, at each reported allocation (--detail).
	StackDepth int
	// Wraps decides which functions are allocation wrappers, whose callers
	// are charged (allocator.WrapperRule.Wraps); nil: none.
	Wraps func(name string) bool
	// UnwindRows bounds the unwind table rows loaded (8 bytes each); 0: the default.
	UnwindRows uint32
	// WrapsKey names Wraps (allocator.WrapperRule.Key): tables marked by
	// it are cached under it.
	WrapsKey string
	// UnwindCache opens the store that keeps built unwind tables across
	// runs; nil, or a nil store: memory only. It is called once the BPF
	// objects are loaded: a user who may not trace gets the one-line
	// ErrPermission, not a complaint about a cache directory first.
	UnwindCache func() *diskcache.Store
	// Log gets the unwind tables' diagnostics; nil: slog.Default().
	Log *slog.Logger
	// SampleBytes > 0 samples allocations: on average one sample per
	// SampleBytes bytes allocated, decided in BPF (see sample() in
	// bpf/sample.h); 0 traces every call.
	SampleBytes uint64
	// SampledBlocks bounds the sampled live blocks remembered in BPF (so
	// that their frees are seen); 0 sizes it from the machine's memory.
	SampledBlocks uint32
	// Host is the whole-host mode: memtrace's own calls are never traced,
	// and Comm and CgroupPath may narrow the processes traced.
	Host bool
	// Comm: only processes whose main thread has this comm (at most 15
	// bytes; longer names are cut, as the kernel cuts them).
	Comm string
	// CgroupPath: only tasks in this cgroup v2 directory or below it.
	CgroupPath string
	// ResidentBytes > 0 samples write faults, on average one per
	// ResidentBytes bytes (bpf/resident.h), once AttachFaults is called;
	// 0: resident attribution is off.
	ResidentBytes uint64
	// FaultPIDs: only the processes given to TraceFaults have their faults
	// sampled (-p and --); otherwise every process Host and its filters
	// select.
	FaultPIDs bool
}

// MaxSampleBytes bounds SampleBytes: the BPF countdown's fixed-point
// arithmetic has room for 2^40.
const MaxSampleBytes = 1 << 40

// CommLen is the kernel's comm length, terminating NUL included (COMM_LEN
// in bpf/memtrace.h).
const CommLen = int(memtraceCommLenCOMM_LEN)

// MaxStackDepth bounds --stack-depth (MAX_STACK in bpf/memtrace.h).
const MaxStackDepth = int(memtraceStackLimitMAX_STACK)

// SampledHints is the size of sampled mode's counting filter in front of
// the sampled blocks (bpf/memtrace.bpf.c, sampled_hint): 4 MiB of counters.
const SampledHints = int(memtraceSampledHintsSAMPLED_HINTS)

// ThreadSlotsMax bounds the probes' per-thread slots (bpf/memtrace.h):
// threads with an id past the slots keep their state in task storage.
const ThreadSlotsMax = int(memtraceThreadSlotsMaxTHREAD_SLOTS_MAX)

// threadSlots sizes the per-thread slots: a slot per possible thread id
// (kernel.pid_max), at most ThreadSlotsMax; ThreadSlotsMax when pid_max
// cannot be read.
func threadSlots() uint32 {
	b, err := os.ReadFile("/proc/sys/kernel/pid_max")
	if err != nil {
		return uint32(ThreadSlotsMax)
	}
	n, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || n <= 0 || n > ThreadSlotsMax {
		return uint32(ThreadSlotsMax)
	}
	return uint32(n)
}

// DefaultUnwindRows is room for the unwind tables of a few hundred
// libraries (libc has about 30 000 rows): 8 MiB.
const DefaultUnwindRows = 1 << 20

// DefaultOptions suit this machine's heaviest benchmark load.
func DefaultOptions() Options {
	return Options{RingBytes: 64 << 20, WakeupBytes: 4 << 20}
}

// Objects are the loaded programs and maps.
type Objects struct {
	objs objects
	// sampleBytes is Options.SampleBytes.
	sampleBytes uint64
	// host holds the raw tracepoint links of the whole-host mode.
	host []link.Link
	// tables loads unwind tables into the maps; stacks numbers the stacks
	// the probes unwound.
	tables     *tables
	stacks     stackStore
	stackDepth int
	// python merges Python frames into stacks (SetPythonStacks); nil: none.
	python PythonStacks
	// pyGen numbers the processes whose code objects' tags are kept
	// (TracePython): py_tags' keys.
	pyGen atomic.Uint32
	// kernel is what the running kernel offers (features.go).
	kernel Kernel
	// faultBytes is Options.ResidentBytes; faults the page-fault links.
	faultBytes uint64
	faults     []link.Link
	// refault is refault_slots mapped (resident.go's Uncharge, MovePage),
	// of 2^refaultBits slots; nil when resident attribution is off.
	refault     []byte
	refaultBits uint32
	// session is the uprobe session program (AttachSession only).
	session *ebpf.Program
	// forgetMu serializes mt_forget_smpl's runs: they share one batch.
	forgetMu sync.Mutex
}

// sessionObjects are mainObjects and the session program, on
// AttachSession.
type sessionObjects struct {
	*mainObjects
	Session *ebpf.Program `ebpf:"mt_alloc_sess"`
}

// objects is what a run loads: the tracing programs and their maps. (The
// test programs are in an object of their own, tracer/bpftest.) Its two
// parts are loaded side by side (loadObjects).
type objects struct {
	mainObjects
	sideObjects
}

// sideObjects are the programs verified beside mainObjects' mt_alloc_ret
// (~32 ms in the verifier, the others ~5 ms): ~25 ms and ~13 ms.
type sideObjects struct {
	OnRssStat *ebpf.Program `ebpf:"mt_rss_stat"`
	Entry     *ebpf.Program `ebpf:"mt_alloc_entry"`
}

// mainObjects are the maps and the other programs.
type mainObjects struct {
	JvmEntry      *ebpf.Program `ebpf:"mt_jvm_entry"`
	Ret           *ebpf.Program `ebpf:"mt_alloc_ret"`
	OnExec        *ebpf.Program `ebpf:"mt_exec"`
	OnExit        *ebpf.Program `ebpf:"mt_exit"`
	Events        *ebpf.Map     `ebpf:"events"`
	Inflight      *ebpf.Map     `ebpf:"inflight"`
	LostByPid     *ebpf.Map     `ebpf:"lost_by_pid"`
	LostTotal     *ebpf.Map     `ebpf:"lost_total"`
	FileKeyOf     *ebpf.Program `ebpf:"mt_file_key"`
	UnwindRows    *ebpf.Map     `ebpf:"unwind_rows"`
	UnwindFiles   *ebpf.Map     `ebpf:"unwind_files"`
	Scratch       *ebpf.Map     `ebpf:"scratch"`
	Sampled       *ebpf.Map     `ebpf:"sampled"`
	ProcCounts    *ebpf.Map     `ebpf:"proc_counts"`
	CgroupFilter  *ebpf.Map     `ebpf:"cgroup_filter"`
	OnFaultUser   *ebpf.Program `ebpf:"mt_fault_user"`
	OnFaultKernel *ebpf.Program `ebpf:"mt_fault_kern"`
	FaultPids     *ebpf.Map     `ebpf:"fault_pids"`
	FaultPending  *ebpf.Map     `ebpf:"fault_pending"`
	FaultSites    *ebpf.Map     `ebpf:"fault_sites"`
	OnPageAlloc   *ebpf.Program `ebpf:"mt_page_alloc"`
	ForgetSampled *ebpf.Program `ebpf:"mt_forget_smpl"`
	ForgetBatches *ebpf.Map     `ebpf:"forget_batches"`
	SampledHint   *ebpf.Map     `ebpf:"sampled_hint"`
	RefaultSlots  *ebpf.Map     `ebpf:"refault_slots"`
	PyProcs       *ebpf.Map     `ebpf:"py_procs"`
}

func (o *objects) Close() error {
	return _MemtraceClose(o.Entry, o.JvmEntry, o.Ret, o.OnExec, o.OnExit, o.FileKeyOf, o.Events, o.Inflight,
		o.LostByPid, o.LostTotal, o.UnwindRows, o.UnwindFiles, o.Scratch, o.Sampled, o.ProcCounts, o.CgroupFilter,
		o.OnFaultUser, o.OnFaultKernel, o.FaultPids, o.OnRssStat, o.FaultPending, o.FaultSites, o.OnPageAlloc,
		o.ForgetSampled, o.ForgetBatches, o.SampledHint, o.RefaultSlots, o.PyProcs)
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
	// While the features are probed (decoding the kernel's BTF, which
	// the probes and the loads' relocations read, is most of it), the
	// object is parsed and the maps no feature decides are made: one
	// after the other these took ~50 ms of the start.
	go kernelBTF().Kernel() //nolint:errcheck // the probe and the loads report a failure
	early := make(chan prepared, 1)
	go func() { early <- prepare(o) }()
	// Before anything is attached or started: a kernel memtrace cannot
	// use is refused in one line, with nothing attached.
	k, err := ProbeKernel()
	p := <-early
	if err != nil {
		p.close()
		return nil, err
	}
	if p.err != nil {
		return nil, p.err
	}
	return loadPrepared(o, k, p)
}

// prepared is the object parsed, with the maps made that every attach
// path shares (all but .rodata, which holds what the kernel's features
// decide: Kernel.adapt).
type prepared struct {
	spec *ebpf.CollectionSpec
	maps map[string]*ebpf.Map
	err  error
}

// prepare parses the object for o and makes its maps but .rodata.
func prepare(o Options) prepared {
	spec, err := loadSpec(o)
	if err != nil {
		return prepared{err: err}
	}
	named := usedMaps(spec, &sessionObjects{mainObjects: &mainObjects{}}, &sideObjects{})
	delete(named, ".rodata")
	m, err := loadMaps(spec, named)
	if err != nil {
		return prepared{err: fmt.Errorf("load BPF maps: %w", err)}
	}
	return prepared{spec: spec, maps: m}
}

// close closes the maps p made.
func (p prepared) close() {
	for _, m := range p.maps {
		m.Close()
	}
}

// load loads the BPF objects for the attach path and features of k.
func load(o Options, k Kernel) (*Objects, error) {
	p := prepare(o)
	if p.err != nil {
		return nil, p.err
	}
	return loadPrepared(o, k, p)
}

// loadPrepared loads the BPF objects of p for the attach path and
// features of k; p's maps are closed once the programs hold them.
func loadPrepared(o Options, k Kernel, p prepared) (*Objects, error) {
	defer p.close()
	spec := p.spec
	err := k.adapt(spec)
	if err != nil {
		return nil, err
	}
	cgroup := -1
	if o.CgroupPath != "" {
		if cgroup, err = unix.Open(o.CgroupPath, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0); err != nil {
			return nil, fmt.Errorf("open cgroup %s: %w", o.CgroupPath, err)
		}
		defer unix.Close(cgroup)
	}
	k.Attach = k.AttachFor(o.SampleBytes)
	t := Objects{sampleBytes: o.SampleBytes, stackDepth: o.StackDepth, kernel: k, faultBytes: o.ResidentBytes}
	var assign any = &t.objs.mainObjects
	sess := sessionObjects{mainObjects: &t.objs.mainObjects}
	if k.Attach == AttachSession {
		// The session program only where the kernel can load it.
		assign = &sess
	}
	err = loadObjects(spec, assign, &t.objs.sideObjects, p.maps)
	dropKernelBTF()
	if err != nil {
		t.objs.Close()
		sess.Session.Close()
		if errors.Is(err, os.ErrPermission) {
			return nil, fmt.Errorf("%w: %w", ErrPermission, err)
		}
		var ve *ebpf.VerifierError
		if errors.As(err, &ve) {
			return nil, fmt.Errorf("load BPF programs: verifier: %+v", ve)
		}
		return nil, fmt.Errorf("load BPF programs: %w", err)
	}
	t.session = sess.Session
	if o.ResidentBytes > 0 {
		if err := spec.Variables["refault_slot_bits"].Get(&t.refaultBits); err != nil {
			t.objs.Close()
			return nil, fmt.Errorf("refault_slot_bits: %w", err)
		}
		if t.refault, err = mapRefaultSlots(t.objs.RefaultSlots); err != nil {
			t.objs.Close()
			return nil, err
		}
	}
	if cgroup >= 0 {
		if err := t.objs.CgroupFilter.Put(uint32(0), uint32(cgroup)); err != nil {
			t.objs.Close()
			return nil, fmt.Errorf("cgroup %s: %w (is it a cgroup v2 directory?)", o.CgroupPath, err)
		}
	}
	var store *diskcache.Store
	if o.UnwindCache != nil {
		store = o.UnwindCache()
	}
	t.tables = newTables(t.objs.FileKeyOf, t.objs.UnwindRows, t.objs.UnwindFiles, spec.Maps["unwind_rows"].MaxEntries, o.Wraps, o.WrapsKey, store, o.Log)
	return &t, nil
}

// loadObjects makes the maps not made yet (made: the caller's, which it
// closes), then loads main's programs and side's side by side: the kernel
// verifies each program on the thread that loads it, and verifying them
// one after the other (~110 ms of kernel time) was most of memtrace's
// start-up. Both loads share the maps.
func loadObjects(spec *ebpf.CollectionSpec, main, side any, made map[string]*ebpf.Map) error {
	named := usedMaps(spec, main, side)
	for n := range made {
		delete(named, n)
	}
	own, err := loadMaps(spec, named)
	if err != nil {
		return err
	}
	// The loads hold clones of the maps (their own descriptors).
	defer func() {
		for _, m := range own {
			m.Close()
		}
	}()
	shared := maps.Clone(own)
	maps.Copy(shared, made)
	opts := &ebpf.CollectionOptions{Cache: kernelBTF(), MapReplacements: shared}
	sideSpec := spec.Copy() // a spec is not for two loads at once
	var sideErr error
	sideDone := make(chan struct{})
	go func() {
		defer close(sideDone)
		sideErr = sideSpec.LoadAndAssign(side, opts)
	}()
	mainErr := spec.LoadAndAssign(main, opts)
	<-sideDone
	// On an error the caller closes what either load assigned.
	return cmp.Or(mainErr, sideErr)
}

// usedMaps names the maps a load of the structs tos makes: those they
// name and those their programs use. (The object has others: .bss.)
func usedMaps(spec *ebpf.CollectionSpec, tos ...any) map[string]bool {
	used := map[string]bool{}
	var walk func(t reflect.Type)
	walk = func(t reflect.Type) {
		for i := range t.NumField() {
			f := t.Field(i)
			ft := f.Type
			if ft.Kind() == reflect.Pointer && ft.Elem().Kind() == reflect.Struct {
				ft = ft.Elem()
			}
			name := f.Tag.Get("ebpf")
			switch {
			case name == "" && ft.Kind() == reflect.Struct:
				walk(ft)
			case f.Type == reflect.TypeFor[*ebpf.Map]():
				used[name] = true
			case f.Type == reflect.TypeFor[*ebpf.Program]() && spec.Programs[name] != nil:
				for _, ins := range spec.Programs[name].Instructions {
					if ins.IsLoadFromMap() && spec.Maps[ins.Reference()] != nil {
						used[ins.Reference()] = true
					}
				}
			}
		}
	}
	for _, to := range tos {
		walk(reflect.TypeOf(to).Elem())
	}
	return used
}

// loadMaps makes the maps of spec named.
func loadMaps(spec *ebpf.CollectionSpec, named map[string]bool) (map[string]*ebpf.Map, error) {
	names := slices.Sorted(maps.Keys(named))
	fields := make([]reflect.StructField, len(names))
	for i, n := range names {
		fields[i] = reflect.StructField{Name: fmt.Sprintf("M%d", i), Type: reflect.TypeFor[*ebpf.Map](),
			Tag: reflect.StructTag(fmt.Sprintf("ebpf:%q", n))}
	}
	v := reflect.New(reflect.StructOf(fields))
	if err := spec.LoadAndAssign(v.Interface(), &ebpf.CollectionOptions{Cache: kernelBTF()}); err != nil {
		return nil, err
	}
	out := make(map[string]*ebpf.Map, len(names))
	for i, n := range names {
		out[n] = v.Elem().Field(i).Interface().(*ebpf.Map)
	}
	return out, nil
}

// loadSpec reads the embedded object and sets what Options decide before
// the programs are loaded.
func loadSpec(o Options) (*ebpf.CollectionSpec, error) {
	spec, err := loadMemtrace()
	if err != nil {
		return nil, fmt.Errorf("load BPF object: %w", err)
	}
	spec.Maps["events"].MaxEntries = uint32(o.RingBytes)
	spec.Maps["thread_slots"].MaxEntries = threadSlots()
	set := func(name string, v any) error {
		if err := spec.Variables[name].Set(v); err != nil {
			return fmt.Errorf("set %s: %w", name, err)
		}
		return nil
	}
	if err := set("wakeup_bytes", uint64(o.WakeupBytes)); err != nil {
		return nil, err
	}
	if o.StackDepth > MaxStackDepth {
		return nil, fmt.Errorf("stack depth %d: at most %d", o.StackDepth, MaxStackDepth)
	}
	if err := set("stack_depth", uint32(o.StackDepth)); err != nil {
		return nil, err
	}
	spec.Maps["unwind_rows"].MaxEntries = DefaultUnwindRows
	// Tables are copied in through a mapping (tables.putRows).
	spec.Maps["unwind_rows"].Flags |= unix.BPF_F_MMAPABLE
	if o.UnwindRows > 0 {
		spec.Maps["unwind_rows"].MaxEntries = o.UnwindRows
	}
	if err := setSampling(spec, o.SampleBytes); err != nil {
		return nil, err
	}
	if o.ResidentBytes > MaxSampleBytes {
		return nil, fmt.Errorf("resident bytes %d: at most %d", o.ResidentBytes, uint64(MaxSampleBytes))
	}
	if err := set("fault_sample_bytes", o.ResidentBytes); err != nil {
		return nil, err
	}
	if o.ResidentBytes == 0 {
		spec.Maps["refault_slots"].MaxEntries = 1
	} else {
		bits := refaultBits(memTotal(), o.ResidentBytes)
		spec.Maps["refault_slots"].MaxEntries = 1 << bits
		if err := set("refault_slot_bits", bits); err != nil {
			return nil, err
		}
	}
	if o.FaultPIDs {
		if err := set("fault_pid_filter", uint8(1)); err != nil {
			return nil, err
		}
	}
	if o.SampleBytes > 0 {
		spec.Maps["sampled"].MaxEntries = sampledBlocks(o)
		if err := set("sampled_hint_mask", uint32(SampledHints-1)); err != nil {
			return nil, err
		}
	} else {
		spec.Maps["sampled"].MaxEntries = 1
		spec.Maps["proc_counts"].MaxEntries = 1
		spec.Maps["sampled_hint"].MaxEntries = 1
	}
	if o.Host {
		if err := set("self_pid", uint32(os.Getpid())); err != nil {
			return nil, err
		}
	}
	if o.Comm != "" {
		var c [2]uint64
		b := make([]byte, CommLen)
		copy(b[:CommLen-1], o.Comm)
		c[0], c[1] = binary.NativeEndian.Uint64(b), binary.NativeEndian.Uint64(b[8:])
		if err := set("filter_comm", uint8(1)); err != nil {
			return nil, err
		}
		if err := set("comm_filter", c); err != nil {
			return nil, err
		}
	}
	if o.CgroupPath != "" {
		if err := set("filter_cgroup", uint8(1)); err != nil {
			return nil, err
		}
	}
	return spec, nil
}

// setSampling sets sample.h's variables, in the probes' object or the
// test object (tracer/bpftest).
func setSampling(spec *ebpf.CollectionSpec, sampleBytes uint64) error {
	if sampleBytes > MaxSampleBytes {
		return fmt.Errorf("sample bytes %d: at most %d", sampleBytes, uint64(MaxSampleBytes))
	}
	if err := spec.Variables["sample_bytes"].Set(sampleBytes); err != nil {
		return fmt.Errorf("set sample_bytes: %w", err)
	}
	if err := spec.Variables["exp_table"].Set(ExpTable()); err != nil {
		return fmt.Errorf("set exp_table: %w", err)
	}
	return nil
}

// sampledBlocks sizes the map of sampled live blocks. The blocks sampled
// among B live bytes number B/SampleBytes on average (fewer when blocks
// are big), so twice the machine's memory over SampleBytes leaves room for
// all of them, within [2^14, 2^22] entries. The map allocates entries as
// they are used; its bucket array costs 16 bytes per entry up front.
func sampledBlocks(o Options) uint32 {
	if o.SampledBlocks > 0 {
		return o.SampledBlocks
	}
	var si unix.Sysinfo_t
	mem := uint64(16 << 30)
	if unix.Sysinfo(&si) == nil {
		mem = uint64(si.Totalram) * uint64(si.Unit)
	}
	n := 2 * mem / o.SampleBytes
	return uint32(min(max(n, 1<<14), 1<<22))
}

// Close releases the programs and maps. Attachments must be detached first.
func (t *Objects) Close() error {
	t.tables.close()
	return errors.Join(t.DetachFaults(), t.DetachHost(), t.objs.Close(), _MemtraceClose(t.session), t.unmapRefault())
}

// unmapRefault unmaps the refault slots (if mapped): Uncharge and
// MovePage do nothing afterwards.
func (t *Objects) unmapRefault() error {
	if t.refault == nil {
		return nil
	}
	err := unix.Munmap(t.refault)
	t.refault = nil
	if err != nil {
		return fmt.Errorf("unmap refault_slots: %w", err)
	}
	return nil
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

// isNotSupported reports whether err says the kernel lacks a feature.
func isNotSupported(err error) bool {
	return errors.Is(err, ebpf.ErrNotSupported) || errors.Is(err, link.ErrNotSupported)
}
