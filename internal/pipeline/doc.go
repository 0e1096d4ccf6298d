// Package pipeline is the part of a run both of its sources share: the
// live trace (package session) and the replay of a recording (package
// replay) are each a Source of Inputs, which one Loop takes into an
// aggregate.Table. Everything after the table is here too: the Printer,
// which builds each report's snapshot and writes it; the StackStore,
// which holds the stacks events name; the judged leak checks; the
// exports' state and files; the numbered dumps; the footprint readings
// recorded with a snapshot (and the live run's, paced: FootprintPacer);
// the peak hint; the debuginfod downloads a report waits for; and the
// settings and exit codes the two share. It imports nothing from eBPF.
package pipeline
