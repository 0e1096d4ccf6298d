package symbolize

import (
	"context"
	"debug/elf"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/memtrace/memtrace/internal/outfile"
	"github.com/memtrace/memtrace/internal/procfile"
)

// A debuginfod server hands out a module's separate debug file by GNU
// build-id: GET URL/buildid/ID/debuginfo. gdb, perf, valgrind and
// systemd-coredump ask the servers named in DEBUGINFOD_URLS and keep what
// they get in one cache, laid out by elfutils' client:
//
//	CACHE/ID/debuginfo   the debug file (mode 0400)
//	CACHE/ID/debuginfo   empty: a miss, not asked again for cache_miss_s
//	CACHE/cache_miss_s   that time in seconds (600 when absent)
//
// Debuginfod reads and writes the same cache, so a file fetched by one tool
// serves the others.

// ErrNoDebuginfo: no server has the debug file, now or (a cached miss)
// when last asked.
var ErrNoDebuginfo = errors.New("no server has the debug file")

// DebuginfodConfig says where to ask and where to keep what comes back.
type DebuginfodConfig struct {
	// URLs of the servers, asked in order: http:// and https:// only.
	URLs []string
	// Unsupported are the other URLs of DEBUGINFOD_URLS (file://, …),
	// not asked.
	Unsupported []string
	// CacheDir is the cache shared with elfutils' client.
	CacheDir string
	// Timeout bounds connecting, waiting for an answer, and any pause in
	// a transfer (DEBUGINFOD_TIMEOUT).
	Timeout time.Duration
	// MaxTime bounds one whole download (DEBUGINFOD_MAXTIME); 0 = none.
	MaxTime time.Duration
	// Log says (at Info) what was fetched, found in the cache or missed.
	Log *slog.Logger
}

// DefaultDebuginfodTimeout is the Timeout when DEBUGINFOD_TIMEOUT is unset.
// elfutils waits up to 90 s for 100 KB; a tracer's report should not.
const DefaultDebuginfodTimeout = 10 * time.Second

// defaultCacheMiss is how long a miss stands when CACHE/cache_miss_s does
// not say (elfutils' default).
const defaultCacheMiss = 600 * time.Second

// maxDebuginfoBytes bounds one download: the largest debug files (a
// browser's) are a few GiB.
const maxDebuginfoBytes = 8 << 30

// DebuginfodFromEnv reads the settings elfutils' client reads: the servers
// in DEBUGINFOD_URLS (space-separated; ok is false when there are none that
// speak http or https: with none to ask, no miss is cached either),
// the cache in DEBUGINFOD_CACHE_PATH, else ~/.debuginfod_client_cache if
// it exists, else $XDG_CACHE_HOME/debuginfod_client, else
// ~/.cache/debuginfod_client; DEBUGINFOD_TIMEOUT and DEBUGINFOD_MAXTIME in
// seconds.
func DebuginfodFromEnv(getenv func(string) string) (c DebuginfodConfig, ok bool) {
	for _, u := range strings.Fields(getenv("DEBUGINFOD_URLS")) {
		if strings.HasPrefix(u, "http://") || strings.HasPrefix(u, "https://") {
			c.URLs = append(c.URLs, u)
		} else {
			c.Unsupported = append(c.Unsupported, u)
		}
	}
	c.CacheDir = debuginfodCacheDir(getenv)
	c.Timeout = DefaultDebuginfodTimeout
	if s, err := strconv.Atoi(getenv("DEBUGINFOD_TIMEOUT")); err == nil && s > 0 {
		c.Timeout = time.Duration(s) * time.Second
	}
	if s, err := strconv.Atoi(getenv("DEBUGINFOD_MAXTIME")); err == nil && s > 0 {
		c.MaxTime = time.Duration(s) * time.Second
	}
	return c, len(c.URLs) > 0
}

func debuginfodCacheDir(getenv func(string) string) string {
	if p := getenv("DEBUGINFOD_CACHE_PATH"); p != "" {
		return p
	}
	home := getenv("HOME")
	if home == "" {
		home = "/"
	}
	legacy := filepath.Join(home, ".debuginfod_client_cache")
	if _, err := os.Stat(legacy); err == nil {
		return legacy
	}
	if x := getenv("XDG_CACHE_HOME"); x != "" {
		return filepath.Join(x, "debuginfod_client")
	}
	return filepath.Join(home, ".cache", "debuginfod_client")
}

// Debuginfod downloads debug files, in the background, at most a few at a
// time, each build-id once. Safe for concurrent use.
type Debuginfod struct {
	cfg    DebuginfodConfig
	log    *slog.Logger
	client *http.Client
	ctx    context.Context
	cancel context.CancelFunc
	slots  chan struct{} // downloads at once
	wg     sync.WaitGroup

	uid, gid int // the cache's owner (own)

	mu      sync.Mutex
	fetches map[string]*fetch
	down    map[string]error // servers that could not be reached: not asked again
}

// fetch is one build-id's look-up: done closes when path or err is set.
type fetch struct {
	done chan struct{}
	path string
	err  error
}

// maxParallelFetches bounds the downloads under way: the network, not the
// CPU, limits them, and a whole host's libraries must not open hundreds of
// connections.
const maxParallelFetches = 4

// NewDebuginfod returns a client; Close stops what it still downloads.
func NewDebuginfod(c DebuginfodConfig) *Debuginfod {
	if c.Timeout <= 0 {
		c.Timeout = DefaultDebuginfodTimeout
	}
	log := c.Log
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	dialer := &net.Dialer{Timeout: c.Timeout}
	tr := &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           dialer.DialContext,
		TLSHandshakeTimeout:   c.Timeout,
		ResponseHeaderTimeout: c.Timeout,
		MaxIdleConnsPerHost:   maxParallelFetches,
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &Debuginfod{cfg: c, log: log, client: &http.Client{Transport: tr}, ctx: ctx, cancel: cancel,
		slots: make(chan struct{}, maxParallelFetches), fetches: map[string]*fetch{}, down: map[string]error{}}
	d.uid, d.gid = ownerOf(c.CacheDir)
	return d
}

// ownerOf is the owner of path, or of its nearest ancestor that exists.
func ownerOf(path string) (uid, gid int) {
	for p := filepath.Clean(path); ; p = filepath.Dir(p) {
		if fi, err := os.Stat(p); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				return int(st.Uid), int(st.Gid)
			}
			return -1, -1
		}
		if p == filepath.Dir(p) {
			return -1, -1
		}
	}
}

// The cache may be a user's (memtrace run as root with that user's HOME
// or DEBUGINFOD_CACHE_PATH): what memtrace adds to it goes to the cache's
// owner, or the user's gdb could not replace it.

// mkdir makes dir (mode 0700, as elfutils) and its missing parents, owned
// as the cache.
func (d *Debuginfod) mkdir(dir string) error {
	if _, err := os.Stat(dir); err == nil {
		return nil
	}
	if parent := filepath.Dir(dir); parent != dir {
		if err := d.mkdir(parent); err != nil {
			return err
		}
	}
	if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	d.own(dir)
	return nil
}

// entry opens the cache's directory of build-id id (cacheentry.go),
// making the cache first if create is set. The cache's own path is the
// operator's (HOME, DEBUGINFOD_CACHE_PATH); below it nothing is followed.
func (d *Debuginfod) entry(id string, create bool) (*entryDir, error) {
	if !validBuildID(id) {
		return nil, fmt.Errorf("build-id %q: not lowercase hex", id)
	}
	if create {
		if err := d.mkdir(d.cfg.CacheDir); err != nil {
			return nil, err
		}
	}
	// A cache in a directory anyone can write to (DEBUGINFOD_CACHE_PATH
	// under /tmp) may have been put there by someone else, or be a link
	// to elsewhere: it is used only as a directory of ours or its owner's.
	if outfile.Shared(filepath.Dir(filepath.Clean(d.cfg.CacheDir))) {
		fi, err := os.Lstat(d.cfg.CacheDir)
		if err != nil {
			return nil, err
		}
		st, ok := fi.Sys().(*syscall.Stat_t)
		if !fi.IsDir() || !ok || (int(st.Uid) != os.Geteuid() && int(st.Uid) != d.uid) {
			return nil, fmt.Errorf("debuginfod cache %s: in a directory others can write to, not a directory of ours", d.cfg.CacheDir)
		}
	}
	return openEntry(d.cfg.CacheDir, id, create, d.uid, d.gid)
}

// validBuildID: a build-id becomes a path component, so it is checked to
// be what GNU ld writes, lowercase hex, before it is used as one.
func validBuildID(id string) bool {
	return len(id) >= 2 && len(id)%2 == 0 && len(id) <= 128 && isHex(id)
}

// own gives path to the cache's owner, when that is not us.
func (d *Debuginfod) own(path string) {
	if d.uid >= 0 && d.uid != os.Geteuid() {
		os.Lchown(path, d.uid, d.gid)
	}
}

// start looks up id in the background, once per id.
func (d *Debuginfod) start(id string) *fetch {
	d.mu.Lock()
	defer d.mu.Unlock()
	if f, ok := d.fetches[id]; ok {
		return f
	}
	f := &fetch{done: make(chan struct{})}
	d.fetches[id] = f
	// The cache is on disk: a hit or a recent miss is answered now, so
	// that even lookups made at once see a file fetched by an earlier run.
	if path, ok, err := d.cached(id); ok {
		f.path, f.err = path, err
		close(f.done)
		return f
	}
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		defer close(f.done)
		select {
		case d.slots <- struct{}{}:
			defer func() { <-d.slots }()
		case <-d.ctx.Done():
			f.err = d.ctx.Err()
			return
		}
		f.path, f.err = d.Fetch(d.ctx, id)
	}()
	return f
}

// Pending is how many look-ups are under way.
func (d *Debuginfod) Pending() int {
	d.mu.Lock()
	defer d.mu.Unlock()
	n := 0
	for _, f := range d.fetches {
		select {
		case <-f.done:
		default:
			n++
		}
	}
	return n
}

// Wait waits until every look-up started is done, or for at most max, and
// returns how many are still under way.
func (d *Debuginfod) Wait(max time.Duration) int {
	deadline := time.NewTimer(max)
	defer deadline.Stop()
	d.mu.Lock()
	fs := make([]*fetch, 0, len(d.fetches))
	for _, f := range d.fetches {
		fs = append(fs, f)
	}
	d.mu.Unlock()
	left := 0
	for _, f := range fs {
		select {
		case <-f.done:
		case <-deadline.C:
			deadline.Reset(0)
			left++
		}
	}
	return left
}

// Close cancels the downloads under way (their partial files are removed)
// and waits for them to stop.
func (d *Debuginfod) Close() {
	d.cancel()
	d.wg.Wait()
}

// Fetch returns the cached debug file of the module with GNU build-id id,
// downloading it first if the cache has none: from the first server that
// has it. A miss is cached (an empty file) whether the servers answered
// "not found" or could not be reached, so a host without network is slowed
// once per file, not on every run; such an error matches ErrNoDebuginfo.
func (d *Debuginfod) Fetch(ctx context.Context, id string) (string, error) {
	if path, ok, err := d.cached(id); ok {
		return path, err
	}
	target := filepath.Join(d.cfg.CacheDir, id, "debuginfo")
	var errs []error
	for _, u := range d.servers() {
		start := time.Now()
		n, err := d.download(ctx, u, id)
		if err == nil {
			d.log.Info("debuginfod: fetched", "build_id", id, "url", u, "bytes", n,
				"took", time.Since(start).Round(time.Millisecond), "path", target)
			return target, nil
		}
		if ctx.Err() != nil {
			return "", fmt.Errorf("debuginfod: %s: %w", id, ctx.Err())
		}
		switch {
		case errors.As(err, new(netError)):
			d.markDown(u, err)
		case !errors.As(err, new(statusError)) && !errors.Is(err, errBadDebugFile):
			// Our side (the cache cannot be written): no miss to remember.
			return "", fmt.Errorf("debuginfod: %s: %w", id, err)
		}
		errs = append(errs, err)
	}
	// Remembered as elfutils does, by an empty file.
	if e, err := d.entry(id, true); err == nil {
		if f, err := e.create("debuginfo", 0o644); err == nil {
			f.Close()
			e.own("debuginfo", d.uid, d.gid)
		}
		e.Close()
	}
	if len(errs) == 0 {
		errs = append(errs, errors.New("every server is unreachable"))
	}
	d.log.Info("debuginfod: not found", "build_id", id, "err", errors.Join(errs...))
	return "", fmt.Errorf("debuginfod: %s: %w: %w", id, ErrNoDebuginfo, errors.Join(errs...))
}

// cached answers from the cache alone (ok), or says the servers must be
// asked: the file is there; an empty file is a miss, which stands for
// cache_miss_s and is then removed.
func (d *Debuginfod) cached(id string) (path string, ok bool, err error) {
	if !validBuildID(id) {
		return "", true, fmt.Errorf("debuginfod: build-id %q: not lowercase hex", id)
	}
	target := filepath.Join(d.cfg.CacheDir, id, "debuginfo")
	// Looked at without following a link (procfile): the cache may be a
	// user's, who could put a link or a FIFO there.
	f, serr := procfile.Open(d.cfg.CacheDir, id+"/debuginfo", procfile.NoSymlinks, maxDebuginfoBytes)
	if serr != nil {
		return "", false, nil
	}
	fi, serr := f.Stat()
	f.Close()
	switch {
	case serr != nil:
		return "", false, nil
	case fi.Size() > 0:
		d.log.Info("debuginfod: in the cache", "build_id", id, "path", target)
		return target, true, nil
	}
	if age := time.Since(fi.ModTime()); age <= d.cacheMiss() {
		d.log.Info("debuginfod: cached miss", "build_id", id, "age", age.Round(time.Second))
		return "", true, fmt.Errorf("debuginfod: %s: %w (cached miss)", id, ErrNoDebuginfo)
	}
	if e, err := d.entry(id, false); err == nil { // the miss is old: ask again
		e.remove("debuginfo")
		e.Close()
	}
	return "", false, nil
}

// cacheMiss reads CACHE/cache_miss_s, as elfutils does.
func (d *Debuginfod) cacheMiss() time.Duration {
	f, err := procfile.Open(d.cfg.CacheDir, "cache_miss_s", procfile.NoSymlinks, 64)
	if err != nil {
		return defaultCacheMiss
	}
	b, err := io.ReadAll(f)
	f.Close()
	if err != nil {
		return defaultCacheMiss
	}
	s, err := strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
	if err != nil || s < 0 {
		return defaultCacheMiss
	}
	return time.Duration(s) * time.Second
}

// servers lists the URLs still worth asking, without duplicates.
func (d *Debuginfod) servers() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	var out []string
	seen := map[string]bool{}
	for _, u := range d.cfg.URLs {
		u = strings.TrimRight(u, "/")
		if seen[u] || d.down[u] != nil {
			continue
		}
		seen[u] = true
		out = append(out, u)
	}
	return out
}

// markDown stops asking a server that could not be reached (or timed out)
// for the rest of the run: one timeout per server, not one per module.
func (d *Debuginfod) markDown(u string, err error) {
	d.mu.Lock()
	first := d.down[u] == nil
	d.down[u] = err
	d.mu.Unlock()
	if first {
		d.log.Warn("debuginfod: server unreachable, not asked again in this run", "url", u, "err", err)
	}
}

// statusError is an HTTP answer other than 200: the server is there but
// has not the file.
type statusError struct {
	url    string
	status string
}

func (e statusError) Error() string { return e.url + ": " + e.status }

// netError: the server could not be reached, did not answer in time, or
// broke off the transfer.
type netError struct{ err error }

func (e netError) Error() string { return e.err.Error() }
func (e netError) Unwrap() error { return e.err }

// errBadDebugFile: what came back is not the module's debug file.
var errBadDebugFile = errors.New("not an ELF file with the module's build-id")

// download fetches URL/buildid/ID/debuginfo into target, through a
// temporary file renamed once checked, so that a concurrent reader (another
// tool sharing the cache) never sees a partial file.
func (d *Debuginfod) download(ctx context.Context, server, id string) (int64, error) {
	if d.cfg.MaxTime > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d.cfg.MaxTime)
		defer cancel()
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	url := server + "/buildid/" + id + "/debuginfo"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, err
	}
	req.Header.Set("User-Agent", "memtrace")
	resp, err := d.client.Do(req)
	if err != nil {
		return 0, netError{err}
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return 0, statusError{url, resp.Status}
	}
	e, err := d.entry(id, true)
	if err != nil {
		return 0, err
	}
	defer e.Close()
	tmp, tmpName, err := e.createTemp("debuginfo.")
	if err != nil {
		return 0, err
	}
	defer e.remove(tmpName) // a no-op once renamed
	defer tmp.Close()
	// A transfer that stalls for Timeout is given up.
	stall := time.AfterFunc(d.cfg.Timeout, func() { cancel(errStalled) })
	defer stall.Stop()
	body := &progressReader{r: io.LimitReader(resp.Body, maxDebuginfoBytes+1), onRead: func() { stall.Reset(d.cfg.Timeout) }}
	n, err := io.Copy(tmp, body)
	if err != nil {
		if c := context.Cause(ctx); c != nil {
			err = c
		}
		if body.readErr != nil || ctx.Err() != nil {
			err = netError{err}
		}
		return n, fmt.Errorf("%s: %w", url, err)
	}
	if n > maxDebuginfoBytes {
		return n, fmt.Errorf("%s: larger than %d bytes", url, int64(maxDebuginfoBytes))
	}
	if got := fileBuildID(tmp); got != id {
		return n, fmt.Errorf("%s: %w (build-id %q)", url, errBadDebugFile, got)
	}
	if t, err := http.ParseTime(resp.Header.Get("Last-Modified")); err == nil {
		ts := []unix.Timespec{unix.NsecToTimespec(t.UnixNano()), unix.NsecToTimespec(t.UnixNano())}
		unix.UtimesNanoAt(e.fd, tmpName, ts, unix.AT_SYMLINK_NOFOLLOW) // as elfutils: the file's own time
	}
	if err := tmp.Chmod(0o400); err != nil {
		return n, err
	}
	e.own(tmpName, d.uid, d.gid)
	return n, e.rename(tmpName, "debuginfo")
}

var errStalled = errors.New("transfer stalled")

// progressReader calls onRead after each read that returned bytes, and
// keeps the read error (to tell it from a write error).
type progressReader struct {
	r       io.Reader
	onRead  func()
	readErr error
}

func (p *progressReader) Read(b []byte) (int, error) {
	n, err := p.r.Read(b)
	if n > 0 {
		p.onRead()
	}
	if err != nil && err != io.EOF {
		p.readErr = err
	}
	return n, err
}

// fileBuildID is the build-id of the ELF file r, or "".
func fileBuildID(r io.ReaderAt) string {
	var id string
	_ = guard("downloaded debug file", func() error {
		f, err := elf.NewFile(r)
		if err != nil {
			return err
		}
		id = buildID(f)
		return nil
	})
	return id
}

// openFetched opens a fetched debug file, CACHE/ID/debuginfo, as a
// build-id candidate: ID/debuginfo without following a link (the cache
// may be a user's), a regular file of a bounded size.
func openFetched(path string) (debugCandidate, error) {
	entry := filepath.Dir(path)
	f, err := procfile.Open(filepath.Dir(entry), filepath.Base(entry)+"/"+filepath.Base(path), procfile.NoSymlinks, maxDebuginfoBytes)
	if err != nil {
		return debugCandidate{}, fmt.Errorf("debug file %s: %w", path, err)
	}
	return debugCandidate{file: f, path: path, kind: byBuildID}, nil
}
