package main

import (
	"os"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/memtrace/memtrace/internal/host"
	"github.com/memtrace/memtrace/internal/report"
)

// addCompletions tells `memtrace completion bash|zsh|fish` (cobra's) what
// the words complete to: -p to the running processes (with their names
// as descriptions), --sort to its keys, and the command to trace to
// files.
func addCompletions(root *cobra.Command) {
	root.ValidArgsFunction = func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return nil, cobra.ShellCompDirectiveDefault
	}
	root.RegisterFlagCompletionFunc("pid", completePIDs)
	sortKeys := func(*cobra.Command, []string, string) ([]string, cobra.ShellCompDirective) {
		return report.SortKeyNames(), cobra.ShellCompDirectiveNoFileComp
	}
	for _, c := range append([]*cobra.Command{root}, root.Commands()...) {
		if c.Flags().Lookup("sort") != nil {
			c.RegisterFlagCompletionFunc("sort", sortKeys)
		}
	}
}

// completePIDs lists the processes whose ID starts with what is typed,
// each described by its name (kernel threads left out: they cannot be
// traced).
func completePIDs(_ *cobra.Command, _ []string, typed string) ([]string, cobra.ShellCompDirective) {
	pids, err := host.PIDs()
	if err != nil {
		return nil, cobra.ShellCompDirectiveError
	}
	// -p takes a list: complete the last element.
	prefix, last := "", typed
	if i := strings.LastIndexByte(typed, ','); i >= 0 {
		prefix, last = typed[:i+1], typed[i+1:]
	}
	var out []string
	for _, pid := range pids {
		s := strconv.Itoa(pid)
		if !strings.HasPrefix(s, last) || host.KernelThread(pid) {
			continue
		}
		name, _ := os.ReadFile("/proc/" + s + "/comm")
		out = append(out, prefix+s+"\t"+strings.TrimSpace(string(name)))
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}
