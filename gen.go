// Package memtrace is the root of the memtrace module; see README.md.
//
// gen.go only holds the bpf2go lines: `make generate` (or `go generate .`)
// compiles bpf/memtrace.bpf.c and writes the Go bindings and the object into
// internal/tracer/, bpf/pagewalk.bpf.c (access statistics' page-table walk) into
// internal/tracer/pagewalk/, and the test programs (bpf/test_sample.bpf.c,
// bpf/test_unwind.bpf.c) into internal/tracer/bpftest (imported by tests only, so
// that the binary does not carry them). The
// output is committed, so building needs no clang. The enums (-type) give
// internal/tracer/ the C constants; internal/tracer/layout_test.go checks the hand-written
// ones of event/ and unwind/ against the object's BTF.
package memtrace

//go:generate go tool bpf2go -tags linux -target amd64 -type event -type small_event -type free_event -type site_event -type code_event -type proc_event -type exec_event -type alloc_counts -type sample_key -type unwind_row -type file_key -type unwind_file -type file_key_query -type stack_limit -type event_kind -type func_id -type jvm_cookie -type func_cookie -type func_domain -type py_proc -type comm_len -type event_flag -type event_cat -type frame_bit -type tag_addr -type unwind_kind -type row_flag -type uc_offset -type file_flag -type exp_bits -type thread_slots_max -type sampled_hints -type forget_batch -output-dir internal/tracer -go-package tracer memtrace bpf/memtrace.bpf.c -- -I bpf -I/usr/include/x86_64-linux-gnu -O2 -g -Wall -Werror
//go:generate go tool bpf2go -tags linux -target amd64 -output-dir internal/tracer/bpftest -go-package bpftest Sampling bpf/test_sample.bpf.c -- -I bpf -I/usr/include/x86_64-linux-gnu -O2 -g -Wall -Werror
//go:generate go tool bpf2go -tags linux -target amd64 -output-dir internal/tracer/bpftest -go-package bpftest Unwind bpf/test_unwind.bpf.c -- -I bpf -I/usr/include/x86_64-linux-gnu -O2 -g -Wall -Werror
//go:generate go tool bpf2go -tags linux -target amd64 -type walk_cfg -type pmd_copy -output-dir internal/tracer/pagewalk -go-package pagewalk pagewalk bpf/pagewalk.bpf.c -- -I bpf -I/usr/include/x86_64-linux-gnu -O2 -g -Wall -Werror
