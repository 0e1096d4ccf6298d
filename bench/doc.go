// Package bench is memtrace's benchmark harness (run by `make bench` through
// bench/cmd/membench; --quick is the smoke run TestQuick runs). It measures
// what tracing costs the traced program and what memtrace itself costs,
// always side by side in one run: the variants of a comparison take turns,
// round after round, and the report gives medians and ratios, never a single
// time. The machine is shared and noisy, so one number means little; every
// round's sample is kept in the JSON. Rounds during which another tracer had
// uprobes in malloc or free of every process (host-wide tracing by someone
// else's test) are detected and left out of the medians.
//
// Sections (each skipped with a note when its tools are missing):
//   - micro: per malloc/free pair cost of testdata/bench/mallocfree.c,
//     untraced, under empty BPF probes at the best placement (the floor) and
//     at +0 (naive, as bcc's memleak and bpftrace place them), under memtrace
//     (and with memtrace's reader stopped, which splits its overhead into
//     the BPF programs' work and the reader's competition for the CPUs),
//     heaptrack and valgrind massif; with 1 thread and with several.
//   - startup: from launching `memtrace -p PID -v` to its "msg=attached".
//   - consumer: decode+aggregate events/s on one core (Go benchmarks).
//   - livemem: Go heap per live block (aggregate's BenchmarkLiveMemory).
//   - sqlite, redis: real programs, untraced against traced.
//   - resident: the whole host's default (resident memory only) against
//     untraced, on faults.c and sqlite3; resident-accuracy: the accuracy
//     fixtures' estimates over the truth; resident-memory: memtrace's own
//     peak memory (idle, 1000 processes, one of 8 GiB).
package bench
