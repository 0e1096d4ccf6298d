//go:build cgofixture

package main

// Built with -tags cgofixture (and CGO_ENABLED=1) the fixture is a cgo
// program: its runtime then maps memory through libc's mmap, which
// memtrace traces.
import _ "runtime/cgo"
