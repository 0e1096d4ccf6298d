// Package memtrace is the root of the memtrace module; see README.md.
//
// gen.go only holds the bpf2go line: `make generate` (or `go generate .`)
// compiles bpf/memtrace.bpf.c and writes the Go bindings and the object into
// tracer/. The output is committed, so building needs no clang.
package memtrace

//go:generate go tool bpf2go -tags linux -target amd64 -type event -type code_event -type proc_event -type alloc_counts -type sample_key -type unwind_row -type file_key -type unwind_file -type file_key_query -output-dir tracer -go-package tracer memtrace bpf/memtrace.bpf.c -- -I bpf -I/usr/include/x86_64-linux-gnu -O2 -g -Wall -Werror
