package recording

import (
	"errors"
	"time"
)

// Magic opens every recording, followed by the format version as two
// bytes, little-endian, and two reserved zero bytes; then comes a zstd
// stream of records.
const Magic = "MEMTRACE"

// Version is the format version this package writes. It reads every
// version from 1: a version-1 file is a version-2 file without leak check
// records or the info's leak fields; a version-2 file is a version-3 file
// without footprint records; a version-3 file is a version-4 file without
// report records; a version-4 file is a version-5 file whose footprint
// records lack the Go heap; a version-5 file is a version-6 file whose
// footprint records lack the swap, the PSS and the rollup flag; a
// version-6 file is a version-7 file without access records, JIT symbol
// records, Python frame records and runtime heaps in its footprint
// records; a version-7 file is a version-8 file without before-table
// records.
const Version = 8

const headerLen = len(Magic) + 4

var (
	// ErrNotRecording: the file does not start with Magic.
	ErrNotRecording = errors.New("not a memtrace recording")
	// ErrVersion: a format version this memtrace cannot read.
	ErrVersion = errors.New("unsupported recording version")
	// ErrTruncated: the recording stops in the middle of a record or of a
	// compressed block, or lacks its end record (a run killed while
	// recording). The records before are good.
	ErrTruncated = errors.New("recording is truncated")
	// ErrCorrupt: a record that cannot be decoded.
	ErrCorrupt = errors.New("recording is corrupt")
)

// Info describes the run; it is the first record.
type Info struct {
	// Memtrace is the format's producer ("memtrace").
	Memtrace string `json:"memtrace"`
	// Start is the wall-clock time the recording began.
	Start time.Time `json:"start"`
	// StartNS is the kernel monotonic clock (ns) at Start: event times
	// minus StartNS are times since the start.
	StartNS  uint64   `json:"start_ns"`
	Hostname string   `json:"hostname"`
	Args     []string `json:"args"`
	// Mode is "pid", "command" or "host".
	Mode        string `json:"mode"`
	SampleBytes uint64 `json:"sample_bytes"`
	// Detail: call sites are whole stacks (--detail), StackDepth frames.
	Detail     bool `json:"detail"`
	StackDepth int  `json:"stack_depth"`
	// Marks are the --mark functions, by index.
	Marks []string `json:"marks"`
	// ResidentOnly: a whole-host run without --heap, which traced no
	// allocator (version 4 on; its reports leave out the heap tables).
	ResidentOnly bool `json:"resident_only,omitempty"`
	// Kernel and Attach: the kernel release the run traced on and the
	// attach path it took (the live report's "kernel" and "attach").
	Kernel string `json:"kernel,omitempty"`
	Attach string `json:"attach,omitempty"`
	// LeakCheck: the run checked its processes for leaks (version 2 on);
	// the leak check records hold what it found. The fields after it are
	// the live run's settings for judging the results, a replay's
	// defaults: --leak-kinds, --fail-on-leak's BYTES (nil without it),
	// the --suppressions patterns and --no-default-suppressions.
	LeakCheck             bool     `json:"leak_check,omitempty"`
	LeakKinds             string   `json:"leak_kinds,omitempty"`
	FailOnLeak            *uint64  `json:"fail_on_leak,omitempty"`
	Suppressions          []string `json:"suppressions,omitempty"`
	NoDefaultSuppressions bool     `json:"no_default_suppressions,omitempty"`
}

// Record tags. Allocations carry the allocator function in their tag's
// low five bits.
const (
	tagEnd          = 0x00
	tagInfo         = 0x01
	tagPID          = 0x02
	tagTID          = 0x03
	tagTime         = 0x04
	tagSite         = 0x05
	tagFree         = 0x06
	tagEvent        = 0x07 // any other event, every field written out
	tagProcess      = 0x08
	tagExited       = 0x09
	tagForgot       = 0x0a
	tagLost         = 0x0b
	tagTotalLost    = 0x0c
	tagSampleBytes  = 0x0d
	tagExactCounts  = 0x0e
	tagHalfLives    = 0x0f
	tagTick         = 0x10
	tagMark         = 0x11
	tagPeakTol      = 0x12
	tagMaps         = 0x13
	tagStack        = 0x14
	tagLeakCheck    = 0x15
	tagFootprint    = 0x16
	tagPyFrame      = 0x1b // 0x17-0x1a: report.go, footprint.go, access.go, jit.go
	tagBeforeTable  = 0x1c // version 8 on: the next event has event.NoTable
	tagAlloc        = 0x40 // | func
	tagRealloc      = 0x60 // | func
	funcMask        = 0x1f
	maxStringLength = 1 << 16
	maxListLength   = 1 << 20
)
