package report

import "github.com/memtrace/memtrace/internal/symbolize"

// FunctionLabel names a frame's function as the text tables do (shortened,
// "[unknown] module+offset" without a symbol), for other pictures of the
// same data (the HTML report's flame graph and legends).
func FunctionLabel(f symbolize.Frame) string { return functionLabel(f) }

// LocationLabel is the frame's "file:line" as the tables print it.
func LocationLabel(f symbolize.Frame) string { return locationLabel(f) }

// ModuleLabel is the base name of the frame's module.
func ModuleLabel(f symbolize.Frame) string { return moduleLabel(f) }
