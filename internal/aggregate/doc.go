// Package aggregate turns a stream of allocator events into per-process,
// per-call-site statistics: a live map of heap blocks, anonymous mapped
// regions, counters and peaks. It is a pure function of the events (and of
// the lost counts and exits it is told about), imports nothing from eBPF,
// and hands reports a deep-copied Snapshot rather than the live Table.
package aggregate
