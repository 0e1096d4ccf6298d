// Package pipeline is the part of a run both of its sources share: the
// live trace (package session) and the replay of a recording (package
// replay) give their inputs to an aggregate.Table, and everything after
// the table is here: the Printer, which builds each report's snapshot and
// writes it; the StackStore, which holds the stacks events name; the
// judged leak checks; the export files; the footprint readings recorded
// with a snapshot; the debuginfod downloads a report waits for; and the
// settings and exit codes the two share. It imports nothing from eBPF.
package pipeline
