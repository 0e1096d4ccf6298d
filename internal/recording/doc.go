// Package recording writes and reads memtrace's history files (--record,
// memtrace replay): every input a run gave its aggregate.Table, in order,
// plus what symbolizing needs later (code mappings with build-ids, the
// stacks of --detail), zstd-compressed. docs/recording.md describes the
// format byte by byte.
//
// A Writer is an aggregate.Observer: set on the live Table, it writes down
// each input as the Table gets it. A Reader gives the records back, and
// Record.ApplyTo feeds one to a new Table, which then holds exactly what
// the live one held at that point.
package recording
