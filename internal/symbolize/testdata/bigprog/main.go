// Command bigprog is a large Go executable with symbols and DWARF for the
// symbolize benchmarks: it links much of memtrace and its dependencies,
// prints READY and waits for a line on its input.
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"go/importer"
	"go/parser"
	"go/types"
	"net/http"
	"os"
	"text/template"

	"github.com/cilium/ebpf"
	"github.com/gdamore/tcell/v2"
	"github.com/ianlancetaylor/demangle"
	"github.com/olekukonko/tablewriter"
	"golang.org/x/arch/x86/x86asm"

	"github.com/memtrace/memtrace/internal/report"
	"github.com/memtrace/memtrace/internal/symbolize"
	"github.com/memtrace/memtrace/internal/tracer"
)

var keep = []any{ebpf.NewMap, tcell.NewScreen, demangle.Filter, tablewriter.NewTable,
	x86asm.Decode, report.WriteJSON, symbolize.NewResolver, tracer.Load,
	http.ListenAndServe, http.Get, json.Marshal, template.New, parser.ParseFile,
	importer.Default, types.NewChecker}

func main() {
	fmt.Println("READY", len(keep))
	bufio.NewReader(os.Stdin).ReadString('\n')
}
