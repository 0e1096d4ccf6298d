package report

// The NDJSON record types. Field order and json names are a published
// contract (docs/json.md): fields may be added, never renamed or removed.
// Every field is always present, zero included, so consumers never need a
// default.

// Record type names, the value of every line's "type".
const (
	typeReport   = "report"
	typeProcess  = "process"
	typeCallsite = "callsite"
)

// reportRecord opens each report, so a consumer of a stream of periodic
// reports can tell where one ends and the next begins.
type reportRecord struct {
	Type       string  `json:"type"`
	TimeNS     uint64  `json:"time_ns"`
	Final      bool    `json:"final"`
	LostEvents uint64  `json:"lost_events"`
	Processes  int     `json:"processes"`
	Sort       SortKey `json:"sort"`
	Top        int     `json:"top"`
	// Host: a whole-host report (process lines, then call sites of all
	// processes ranked together). Sampled: heap figures are estimates
	// from one sample per SampleBytes bytes on average (estimate.go).
	Host        bool   `json:"host"`
	Sampled     bool   `json:"sampled"`
	SampleBytes uint64 `json:"sample_bytes"`
	// Kernel and Attach: Options.Kernel and Options.Attach.
	Kernel string `json:"kernel"`
	Attach string `json:"attach"`
	// memtrace's own resident memory (Options.SelfMemory; 0 in a replay).
	MemtracePeakRSS uint64 `json:"memtrace_peak_rss_bytes"`
	MemtraceRSS     uint64 `json:"memtrace_rss_bytes"`
	// Dumps only (epoch.go): the dump's number and the previous dump's time.
	Epoch        *int    `json:"epoch,omitempty"`
	EpochStartNS *uint64 `json:"epoch_start_ns,omitempty"`
}

// selfMemory fills r's memtrace_* fields from o.
func (r reportRecord) selfMemory(o Options) reportRecord {
	if o.SelfMemory != nil {
		r.MemtracePeakRSS, r.MemtraceRSS = o.SelfMemory.Resident()
	}
	return r
}

// processRecord holds one process's totals; the top-level live_*, alloc*
// and free* fields are heap figures, anonymous mappings are under "mmap".
type processRecord struct {
	Type string `json:"type"`
	PID  uint32 `json:"pid"`
	Comm string `json:"comm"`
	// Whole host only: the process's rank in the list by footprint
	// (1 first), and whether memtrace saw a fault or an allocation of it.
	Rank           *int       `json:"rank,omitempty"`
	Traced         *bool      `json:"traced,omitempty"`
	LiveBytes      uint64     `json:"live_bytes"`
	LiveAllocs     uint64     `json:"live_allocs"`
	Allocs         uint64     `json:"allocs"`
	AllocBytes     uint64     `json:"alloc_bytes"`
	Frees          uint64     `json:"frees"`
	FreedBytes     uint64     `json:"freed_bytes"`
	PeakLiveBytes  uint64     `json:"peak_live_bytes"`
	UnmatchedFrees uint64     `json:"unmatched_frees"`
	LostEvents     uint64     `json:"lost_events"`
	Final          bool       `json:"final"`
	Exited         bool       `json:"exited"`
	TimeNS         uint64     `json:"time_ns"`
	Mmap           mmapTotals `json:"mmap"`
	ExitTimeNS     uint64     `json:"exit_time_ns"`
	// Rates: heap decaying averages, one per half-life (json_rates.go).
	Rates []rateRecord `json:"rates"`
	// Sampled mode (estimate.go): the heap figures but allocs and
	// alloc_bytes are estimates; live_bytes' standard error.
	Sampled         bool   `json:"sampled"`
	SampleBytes     uint64 `json:"sample_bytes"`
	LiveBytesStderr uint64 `json:"live_bytes_stderr"`
	// Footprint: the kernel's reading of the process (footprint.go).
	Footprint footprintRecord `json:"footprint"`
	// Resident: its resident memory by who made it resident, in all
	// (the resident records give it by call site); zeros when off.
	Resident processResident `json:"resident"`
	// ManagedHeaps: the runtime heaps found (managed_heaps.go); omitted
	// when none.
	ManagedHeaps []managedHeapRecord `json:"managed_heaps,omitempty"`
	// The leak check (json_leaks.go): present only in runs that check.
	LeakChecked *bool `json:"leak_checked,omitempty"`
	leakRecord
	// Dumps only (epoch.go): the activity since the previous dump.
	epochRecord
	// A JVM only (jvm.go): its heap by NMT category.
	JVMCategories []jvmCategoryRecord `json:"jvm_categories,omitempty"`
}

// processResident is a process's resident estimate in all.
type processResident struct {
	Bytes       uint64 `json:"bytes"`
	BytesStderr uint64 `json:"bytes_stderr"`
	Pages       uint64 `json:"pages"`
	SampleBytes uint64 `json:"sample_bytes"`
	CheckedNS   uint64 `json:"checked_ns"`
}

// mmapTotals are a process's anonymous-mapping totals.
type mmapTotals struct {
	LiveBytes     uint64 `json:"live_bytes"`
	LiveRegions   uint64 `json:"live_regions"`
	Maps          uint64 `json:"maps"`
	MappedBytes   uint64 `json:"mapped_bytes"`
	Unmaps        uint64 `json:"unmaps"`
	UnmappedBytes uint64 `json:"unmapped_bytes"`
	PeakLiveBytes uint64 `json:"peak_live_bytes"`
	// The live regions' address space by state, from the footprint.
	mappingState
}

// mappingState is address space by NMT's states (footprint.State).
type mappingState struct {
	ReservedBytes  uint64 `json:"reserved_bytes"`
	CommittedBytes uint64 `json:"committed_bytes"`
	ResidentBytes  uint64 `json:"resident_bytes"`
}

// callsiteRecord is one call site of one category. For "mmap" the counters
// mean regions, mmap calls and munmap calls (see docs/json.md).
type callsiteRecord struct {
	Type       string `json:"type"`
	PID        uint32 `json:"pid"`
	Category   string `json:"category"`
	Function   string `json:"function"`
	File       string `json:"file"`
	Line       int    `json:"line"`
	Module     string `json:"module"`
	Address    string `json:"address"`
	LiveBytes  uint64 `json:"live_bytes"`
	LiveAllocs uint64 `json:"live_allocs"`
	Allocs     uint64 `json:"allocs"`
	AllocBytes uint64 `json:"alloc_bytes"`
	Frees      uint64 `json:"frees"`
	FreedBytes uint64 `json:"freed_bytes"`
	Final      bool   `json:"final"`
	Offset     string `json:"offset"`
	TimeNS     uint64 `json:"time_ns"`
	// Rates: decaying averages, one per half-life (json_rates.go).
	Rates []rateRecord `json:"rates"`
	// Inlined: the inline chain of the call, innermost first; [] when the
	// call is not in inlined code (symbolize.Frame.Inlined).
	Inlined []inlineFrame `json:"inlined"`
	// Python: the call site is a Python frame (function its qualified
	// name, file its .py path, line its line; module "python"), not a
	// native one.
	Python bool `json:"python"`
	// Comm is the process's, so that whole-host records stand alone.
	Comm string `json:"comm"`
	// Sampled mode (estimate.go): the figures are estimates; live_bytes'
	// standard error.
	Sampled         bool   `json:"sampled"`
	SampleBytes     uint64 `json:"sample_bytes"`
	LiveBytesStderr uint64 `json:"live_bytes_stderr"`
	// The allocator's immediate caller when a wrapper was skipped (the
	// charged site's figures are above): its function, file, line, module
	// and address; empty (and leaf_address "") when the caller was charged.
	LeafFunction string `json:"leaf_function"`
	LeafFile     string `json:"leaf_file"`
	LeafLine     int    `json:"leaf_line"`
	LeafModule   string `json:"leaf_module"`
	LeafAddress  string `json:"leaf_address"`
	// An mmap site's regions by state (0 for heap sites; footprint.go).
	mappingState
	// The leak check's figures for the site's blocks (json_leaks.go):
	// present only in runs that check.
	leakRecord
	// Dumps only (epoch.go): the activity since the previous dump.
	epochRecord
	// --detail only: the call stack, innermost first, and whether it stops
	// short of the thread's first function.
	Stack          []stackFrame `json:"stack,omitempty"`
	StackTruncated *bool        `json:"stack_truncated,omitempty"`
	// A JVM's heap sites only (jvm.go): the NMT category of their calls.
	JVMCategory *string `json:"jvm_category,omitempty"`
	// Sites charged before their file's unwind table was in: true (absent otherwise).
	BeforeTable bool `json:"before_table,omitempty"`
	// An mmap site of a runtime heap's own allocator ("V8 heap"; absent
	// otherwise; managed_heaps.go).
	ManagedHeap string `json:"managed_heap,omitempty"`
}

// inlineFrame is one source-level frame of an inline chain.
type inlineFrame struct {
	Function string `json:"function"`
	File     string `json:"file"`
	Line     int    `json:"line"`
}
