// Command membench is memtrace's benchmark harness (`make bench`): it
// measures tracing overhead side by side with untraced runs, empty probes,
// heaptrack and valgrind, prints tables and writes the figures as JSON.
// Run it as root from the module's root.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"

	"github.com/memtrace/memtrace/internal/bench"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

func run(args []string, stdout, stderr io.Writer) int {
	cfg, opts, err := parseFlags(args)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "membench: %v\n", err)
		return 2
	}
	// Ctrl-C or SIGTERM ends the children (their process groups) before we go.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if opts.install {
		if err := bench.Install(ctx, stderr); err != nil {
			fmt.Fprintf(stderr, "membench: %v\n", err)
			return 1
		}
	}
	var progress io.Writer
	if !opts.silent {
		progress = stderr
	}
	res, err := bench.Run(ctx, cfg, progress)
	if err != nil {
		fmt.Fprintf(stderr, "membench: %v\n", err)
		return 1
	}
	if err := res.WriteText(stdout); err != nil {
		fmt.Fprintf(stderr, "membench: %v\n", err)
		return 1
	}
	if opts.json != "" {
		if err := res.WriteJSON(opts.json); err != nil {
			fmt.Fprintf(stderr, "membench: %v\n", err)
			return 1
		}
		fmt.Fprintf(stdout, "\nresults written to %s\n", opts.json)
	}
	return 0
}

type options struct {
	install bool
	silent  bool
	json    string
}

func parseFlags(args []string) (bench.Config, options, error) {
	fs := flag.NewFlagSet("membench", flag.ContinueOnError)
	def := bench.DefaultConfig()
	var o options
	quick := fs.Bool("quick", false, "smoke run: small sizes, one round")
	rounds := fs.Int("rounds", 0, fmt.Sprintf("rounds per comparison (default %d; --quick: 1)", def.Rounds))
	pairs := fs.Int64("pairs", 0, fmt.Sprintf("malloc/free pairs per microbenchmark run (default %d; --quick: %d)", def.Pairs, bench.QuickConfig().Pairs))
	threads := fs.String("threads", "2,8", "thread counts of the multi-threaded tables (\"\" for none)")
	sections := fs.String("sections", strings.Join(bench.Sections, ","), "sections to run")
	redisN := fs.Int("redis-requests", 0, fmt.Sprintf("redis-benchmark -n (default %d)", def.RedisRequests))
	memtrace := fs.String("memtrace", "", "a prebuilt memtrace binary (default: build ./cmd/memtrace)")
	fs.StringVar(&o.json, "json", "bench/results/latest.json", "write the results as JSON here (\"\" for none)")
	fs.BoolVar(&o.install, "install", false, "first apt-get install heaptrack valgrind sqlite3 redis-server")
	fs.BoolVar(&o.silent, "q", false, "no progress lines on stderr")
	if err := fs.Parse(args); err != nil {
		return def, o, err
	}
	if fs.NArg() > 0 {
		return def, o, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	cfg := def
	if *quick {
		cfg = bench.QuickConfig()
	}
	if *rounds != 0 {
		cfg.Rounds = *rounds
	}
	if *pairs != 0 {
		cfg.Pairs = *pairs
	}
	if *redisN != 0 {
		cfg.RedisRequests = *redisN
	}
	cfg.Memtrace = *memtrace
	cfg.Threads = nil
	for _, f := range strings.Split(*threads, ",") {
		if f = strings.TrimSpace(f); f == "" {
			continue
		}
		n, err := strconv.Atoi(f)
		if err != nil {
			return cfg, o, fmt.Errorf("--threads: %q is not a number", f)
		}
		cfg.Threads = append(cfg.Threads, n)
	}
	cfg.Sections = nil
	for _, s := range strings.Split(*sections, ",") {
		if s = strings.TrimSpace(s); s != "" {
			cfg.Sections = append(cfg.Sections, s)
		}
	}
	return cfg, o, nil
}
