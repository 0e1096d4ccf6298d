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
//     heaptrack and valgrind massif; with 1 thread and with several. The
//     floor has a two-trap variant (entries only: what sampled mode needs
//     where uprobe sessions let it skip returns). kernel.bpf_stats_enabled
//     is on during the bench (BPF_ENABLE_STATS), and each row gives each BPF
//     program's runs per pair and ns per run (memtrace -v logs them).
//   - startup: from launching `memtrace -p PID -v` to its "msg=attached".
//   - node: `node -e 0` (a 98 MB binary) untraced, under memtrace with its
//     unwind tables cached and on a first run, and under heaptrack; and the
//     tables' load time memtrace -v gives, first run and cached.
//   - consumer: decode+aggregate events/s on one core (Go benchmarks).
//   - livemem: Go heap per live block (aggregate's BenchmarkLiveMemory).
//   - sqlite, redis: real programs, untraced against traced.
//   - blocks: testdata/bench/blocks.c (5 million small blocks, half freed)
//     untraced, under memtrace and heaptrack; and memtrace's peak RSS per
//     live block, less a 1000-block run's.
//   - heapscale: memtrace's own peak RSS for testdata/bench/hold.c (5
//     million blocks of 48 bytes held to the exit, leak check included)
//     and for /bin/true, the leak check's wall and CPU time beside
//     valgrind's leak check of the same heap, and the Go benchmarks of
//     bytes per live block over the whole user-space path
//     (BenchmarkLivePath) and of the check (leakcheck's
//     BenchmarkCheckChain5M); docs/memory.md.
//   - resident: the whole host's default (resident memory only) against
//     untraced, on faults.c and sqlite3; resident-accuracy: the accuracy
//     fixtures' estimates over the truth; resident-memory: memtrace's own
//     peak memory (idle, 1000 processes, one of 8 GiB).
//   - hoststart: memtrace's CPU per short-lived process start (/bin/true,
//     sqlite3) in whole-host mode, by default and with --heap.
//   - access: --access's reading of one epoch of a 1-10 GiB heap, in ms of
//     CPU, and testdata/bench/writeheavy.c's slowdown at 1 s epochs.
package bench
