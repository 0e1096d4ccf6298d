package symbolize

import "log/slog"

// DefaultDebugDir is where Debian, Ubuntu, Fedora and most distributions
// install separate debug files (libc6-dbg, the -dbgsym and -debuginfo
// packages).
const DefaultDebugDir = "/usr/lib/debug"

// Option configures a Resolver.
type Option func(*options)

type options struct {
	debugDirs  []string
	debuginfod *Debuginfod
	log        *slog.Logger
}

func defaultOptions() options {
	return options{debugDirs: []string{DefaultDebugDir}}
}

// WithDebugDirs sets the global debug directories searched for separate
// debug files, in order, replacing the default (/usr/lib/debug): under each
// D, D/.build-id/xx/rest.debug by GNU build-id, and D/DIR/NAME for a
// .gnu_debuglink NAME of a module in directory DIR. No directory at all
// still finds debug links next to the module and in its .debug/ subdir.
func WithDebugDirs(dirs ...string) Option {
	return func(o *options) { o.debugDirs = append([]string(nil), dirs...) }
}

// WithDebuginfod makes modules that have no debug information, neither
// their own nor in a debug directory, ask d for their debug file when they
// are opened (in the background; see Debuginfod). The caller closes d.
func WithDebuginfod(d *Debuginfod) Option {
	return func(o *options) { o.debuginfod = d }
}

// WithLog gives the resolver a logger for problems with what processes
// provide (an untrusted or oversized perf map); the default is
// slog.Default().
func WithLog(l *slog.Logger) Option {
	return func(o *options) { o.log = l }
}
