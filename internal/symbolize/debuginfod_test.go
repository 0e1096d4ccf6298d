package symbolize

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

func TestDebuginfodFromEnv(t *testing.T) {
	home := tempDir(t)
	legacyHome := tempDir(t)
	if err := os.Mkdir(filepath.Join(legacyHome, ".debuginfod_client_cache"), 0o700); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		env  map[string]string
		want DebuginfodConfig
		ok   bool
	}{
		{"no servers", map[string]string{"HOME": home},
			DebuginfodConfig{CacheDir: home + "/.cache/debuginfod_client", Timeout: DefaultDebuginfodTimeout}, false},
		{"two servers, spaces", map[string]string{"HOME": home, "DEBUGINFOD_URLS": " https://a.example/  http://b.example:8002 "},
			DebuginfodConfig{URLs: []string{"https://a.example/", "http://b.example:8002"},
				CacheDir: home + "/.cache/debuginfod_client", Timeout: DefaultDebuginfodTimeout}, true},
		{"XDG_CACHE_HOME", map[string]string{"HOME": home, "XDG_CACHE_HOME": "/x", "DEBUGINFOD_URLS": "http://s"},
			DebuginfodConfig{URLs: []string{"http://s"}, CacheDir: "/x/debuginfod_client", Timeout: DefaultDebuginfodTimeout}, true},
		{"DEBUGINFOD_CACHE_PATH first", map[string]string{"HOME": legacyHome, "XDG_CACHE_HOME": "/x", "DEBUGINFOD_CACHE_PATH": "/c", "DEBUGINFOD_URLS": "http://s"},
			DebuginfodConfig{URLs: []string{"http://s"}, CacheDir: "/c", Timeout: DefaultDebuginfodTimeout}, true},
		{"legacy cache when it exists", map[string]string{"HOME": legacyHome, "XDG_CACHE_HOME": "/x", "DEBUGINFOD_URLS": "http://s"},
			DebuginfodConfig{URLs: []string{"http://s"}, CacheDir: legacyHome + "/.debuginfod_client_cache", Timeout: DefaultDebuginfodTimeout}, true},
		{"no HOME", map[string]string{"DEBUGINFOD_URLS": "http://s"},
			DebuginfodConfig{URLs: []string{"http://s"}, CacheDir: "/.cache/debuginfod_client", Timeout: DefaultDebuginfodTimeout}, true},
		{"timeouts", map[string]string{"HOME": home, "DEBUGINFOD_URLS": "http://s", "DEBUGINFOD_TIMEOUT": "3", "DEBUGINFOD_MAXTIME": "20"},
			DebuginfodConfig{URLs: []string{"http://s"}, CacheDir: home + "/.cache/debuginfod_client", Timeout: 3 * time.Second, MaxTime: 20 * time.Second}, true},
		{"file:// is not asked", map[string]string{"HOME": home, "DEBUGINFOD_URLS": "file:///srv/debug ftp://x"},
			DebuginfodConfig{Unsupported: []string{"file:///srv/debug", "ftp://x"}, CacheDir: home + "/.cache/debuginfod_client", Timeout: DefaultDebuginfodTimeout}, false},
		{"bad timeouts keep the defaults", map[string]string{"HOME": home, "DEBUGINFOD_URLS": "http://s", "DEBUGINFOD_TIMEOUT": "x", "DEBUGINFOD_MAXTIME": "-1"},
			DebuginfodConfig{URLs: []string{"http://s"}, CacheDir: home + "/.cache/debuginfod_client", Timeout: DefaultDebuginfodTimeout}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := DebuginfodFromEnv(func(k string) string { return tc.env[k] })
			if ok != tc.ok || got.CacheDir != tc.want.CacheDir || got.Timeout != tc.want.Timeout ||
				got.MaxTime != tc.want.MaxTime || strings.Join(got.URLs, "|") != strings.Join(tc.want.URLs, "|") ||
				strings.Join(got.Unsupported, "|") != strings.Join(tc.want.Unsupported, "|") {
				t.Errorf("got %+v, %v; want %+v, %v", got, ok, tc.want, tc.ok)
			}
		})
	}
}

// debugServer serves debug files by build-id as debuginfod does, 404 for
// any other, and counts the requests. gate, when set, holds each answer
// until it is closed.
type debugServer struct {
	files    map[string][]byte
	requests atomic.Int64
	gate     chan struct{}
}

func (s *debugServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.requests.Add(1)
	if s.gate != nil {
		<-s.gate
	}
	id, ok := strings.CutSuffix(strings.TrimPrefix(r.URL.Path, "/buildid/"), "/debuginfo")
	b, found := s.files[id]
	if !ok || !found {
		http.NotFound(w, r)
		return
	}
	w.Header().Set("Last-Modified", "Tue, 03 Jan 2023 04:05:06 GMT")
	w.Write(b)
}

// debugFixture builds leak.c with -g and returns the binary, a stripped
// copy, its debug file's bytes and its build-id.
func debugFixture(t *testing.T) (bin, stripped string, debug []byte, id string) {
	t.Helper()
	needTool(t, "gcc")
	needTool(t, "objcopy")
	dir := tempDir(t)
	bin = buildFixture(t, dir, "leak", "-O2", "-g")
	stripped = stripCopy(t, bin, "leak-stripped")
	dbg := filepath.Join(dir, "leak.debug")
	run(t, "objcopy", "--only-keep-debug", bin, dbg)
	debug, err := os.ReadFile(dbg)
	if err != nil {
		t.Fatal(err)
	}
	return bin, stripped, debug, buildIDOf(t, bin)
}

// The cache is elfutils' layout: CACHE/ID/debuginfo (0400, the server's
// time), an empty file for a miss, which stands for cache_miss_s.
func TestDebuginfodCache(t *testing.T) {
	_, _, debug, id := debugFixture(t)
	const missing = "0123456789abcdef0123456789abcdef01234567"
	srv := &debugServer{files: map[string][]byte{id: debug, "00aa": debug}}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	cache := filepath.Join(tempDir(t), "cache")
	// A dead server first: the next one is asked.
	dead := deadURL(t)
	client := func() *Debuginfod {
		return NewDebuginfod(DebuginfodConfig{URLs: []string{dead, ts.URL + "/"}, CacheDir: cache, Timeout: 5 * time.Second})
	}
	target := filepath.Join(cache, id, "debuginfo")

	steps := []struct {
		name     string
		id       string
		prepare  func()
		path     string
		miss     bool // errors.Is(err, ErrNoDebuginfo)
		requests int64
		size     int64 // of CACHE/ID/debuginfo afterwards; -1: absent
	}{
		{"download", id, nil, target, false, 1, int64(len(debug))},
		{"in the cache", id, nil, target, false, 0, int64(len(debug))},
		{"not on the server", missing, nil, "", true, 1, 0},
		{"cached miss", missing, nil, "", true, 0, 0},
		{"expired miss", missing, func() {
			os.WriteFile(filepath.Join(cache, "cache_miss_s"), []byte("60\n"), 0o644)
			old := time.Now().Add(-61 * time.Second)
			os.Chtimes(filepath.Join(cache, missing, "debuginfo"), old, old)
		}, "", true, 1, 0},
		{"another build's file is refused", "00aa", nil, "", true, 1, 0},
		{"not hex", "../x", nil, "", false, 0, -1},
	}
	for _, st := range steps {
		if st.prepare != nil {
			st.prepare()
		}
		before := srv.requests.Load()
		d := client()
		path, err := d.Fetch(context.Background(), st.id)
		d.Close()
		if path != st.path || errors.Is(err, ErrNoDebuginfo) != st.miss || (st.path == "") == (err == nil) {
			t.Errorf("%s: Fetch = %q, %v; want %q, miss %v", st.name, path, err, st.path, st.miss)
		}
		if n := srv.requests.Load() - before; n != st.requests {
			t.Errorf("%s: %d requests, want %d", st.name, n, st.requests)
		}
		size := int64(-1)
		if fi, err := os.Stat(filepath.Join(cache, st.id, "debuginfo")); err == nil {
			size = fi.Size()
		}
		if size != st.size {
			t.Errorf("%s: cache file of %d bytes, want %d", st.name, size, st.size)
		}
	}
	b, err := os.ReadFile(target)
	if err != nil || !bytes.Equal(b, debug) {
		t.Fatalf("cached file differs from the served one (%v)", err)
	}
	fi, _ := os.Stat(target)
	if fi.Mode().Perm() != 0o400 || !fi.ModTime().Equal(time.Date(2023, 1, 3, 4, 5, 6, 0, time.UTC)) {
		t.Errorf("cached file mode %v, time %v; want 0400, the server's Last-Modified", fi.Mode().Perm(), fi.ModTime())
	}
	if left, _ := filepath.Glob(filepath.Join(cache, "*", "debuginfo.*")); len(left) > 0 {
		t.Errorf("temporary files left: %q", left)
	}

	// elfutils' own client reads the same cache: the file, and the miss.
	needTool(t, "debuginfod-find")
	find := func(id string) (string, error) {
		cmd := exec.Command("debuginfod-find", "debuginfo", id)
		cmd.Env = []string{"DEBUGINFOD_CACHE_PATH=" + cache, "DEBUGINFOD_URLS=" + dead}
		out, err := cmd.CombinedOutput()
		return strings.TrimSpace(string(out)), err
	}
	if out, err := find(id); err != nil || out != target {
		t.Errorf("debuginfod-find: %q, %v; want %q from the cache", out, err, target)
	}
	if out, err := find(missing); err == nil || !strings.Contains(out, "No such file") {
		t.Errorf("debuginfod-find of the missed id: %q, %v; want the cached miss (not a connection)", out, err)
	}
}

// deadURL is a loopback URL where nothing listens.
func deadURL(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	u := "http://" + l.Addr().String()
	l.Close()
	return u
}

// silentServer accepts connections and never answers; it counts them.
func silentServer(t *testing.T, answer func(net.Conn)) (url string, accepts *atomic.Int64) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	accepts = &atomic.Int64{}
	var conns []net.Conn
	var mu sync.Mutex
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			accepts.Add(1)
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			if answer != nil {
				go answer(c)
			}
		}
	}()
	t.Cleanup(func() {
		l.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	return "http://" + l.Addr().String(), accepts
}

// A server that does not answer, or stops in the middle, costs one
// timeout: the miss is cached, and the server is not asked again in the
// run.
func TestDebuginfodTimeout(t *testing.T) {
	const timeout = 300 * time.Millisecond
	for _, tc := range []struct {
		name   string
		answer func(net.Conn)
	}{
		{"no answer", nil},
		{"stalls in the body", func(c net.Conn) {
			c.Read(make([]byte, 4096))
			c.Write([]byte("HTTP/1.1 200 OK\r\nContent-Length: 100000\r\n\r\n\x7fELF"))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			url, accepts := silentServer(t, tc.answer)
			cache := tempDir(t)
			d := NewDebuginfod(DebuginfodConfig{URLs: []string{url}, CacheDir: cache, Timeout: timeout})
			defer d.Close()
			start := time.Now()
			_, err := d.Fetch(context.Background(), "aaaa")
			took := time.Since(start)
			if !errors.Is(err, ErrNoDebuginfo) {
				t.Errorf("Fetch: %v, want ErrNoDebuginfo", err)
			}
			// Bounds of correctness, not of speed: it gave up, by the timeout.
			if took < timeout || took > 20*timeout {
				t.Errorf("gave up after %v, timeout %v", took, timeout)
			}
			if fi, err := os.Stat(filepath.Join(cache, "aaaa", "debuginfo")); err != nil || fi.Size() != 0 {
				t.Errorf("no cached miss: %v", err)
			}
			// Another module in the same run: the server is not asked.
			if _, err := d.Fetch(context.Background(), "bbbb"); !errors.Is(err, ErrNoDebuginfo) {
				t.Errorf("second Fetch: %v", err)
			}
			// The next run: the miss is cached.
			d2 := NewDebuginfod(DebuginfodConfig{URLs: []string{url}, CacheDir: cache, Timeout: timeout})
			defer d2.Close()
			if _, err := d2.Fetch(context.Background(), "aaaa"); !errors.Is(err, ErrNoDebuginfo) {
				t.Errorf("next run's Fetch: %v", err)
			}
			if n := accepts.Load(); n != 1 {
				t.Errorf("%d connections, want 1", n)
			}
		})
	}
}

// A resolver never waits for a download: a stripped module resolves
// without names until its debug file is there, then with them.
func TestResolverDebuginfod(t *testing.T) {
	_, stripped, debug, id := debugFixture(t)
	srv := &debugServer{files: map[string][]byte{id: debug}, gate: make(chan struct{})}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	cache := tempDir(t)
	d := NewDebuginfod(DebuginfodConfig{URLs: []string{ts.URL}, CacheDir: cache, Timeout: 5 * time.Second})
	defer d.Close()

	fx := startFixture(t, stripped)
	r := NewResolver(WithDebugDirs(), WithDebuginfod(d))
	defer r.Close()
	if got := leakFrames(t, r, fx); !sameStrings(got, strippedLeakFrames) {
		t.Errorf("while downloading: frames %q, want %q", got, strippedLeakFrames)
	}
	close(srv.gate)
	if left := d.Wait(10 * time.Second); left != 0 {
		t.Fatalf("%d downloads unfinished", left)
	}
	if got, want := leakFrames(t, r, fx), wantLeakFrames(t); !sameStrings(got, want) {
		t.Errorf("downloaded: frames %q, want %q", got, want)
	}
	want := filepath.Join(cache, id, "debuginfo")
	if m := r.moduleOf(fx.pid(), fx.addr("LEAK_A")); m == nil || m.DebugFile() != want {
		t.Errorf("debug file not %s", want)
	}

	// A module with debug information asks for nothing; the stripped one,
	// already fetched, comes from the cache at once.
	before := srv.requests.Load()
	r2 := NewResolver(WithDebugDirs(), WithDebuginfod(NewDebuginfod(DebuginfodConfig{URLs: []string{ts.URL}, CacheDir: cache})))
	defer r2.Close()
	if got, want := leakFrames(t, r2, fx), wantLeakFrames(t); !sameStrings(got, want) {
		t.Errorf("from the cache: frames %q, want %q", got, want)
	}
	if n := srv.requests.Load() - before; n != 0 {
		t.Errorf("%d requests for a cached file", n)
	}
}

// Run as root in a user's cache, memtrace leaves what it adds to that
// user, as gdb (run by the user) must be able to replace it.
func TestDebuginfodCacheOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("chown needs root")
	}
	_, _, debug, id := debugFixture(t)
	ts := httptest.NewServer(&debugServer{files: map[string][]byte{id: debug}})
	defer ts.Close()
	home := tempDir(t)
	const uid, gid = 12345, 23456
	if err := os.Chown(home, uid, gid); err != nil {
		t.Fatal(err)
	}
	cache := filepath.Join(home, ".cache", "debuginfod_client")
	d := NewDebuginfod(DebuginfodConfig{URLs: []string{ts.URL}, CacheDir: cache, Timeout: 5 * time.Second})
	defer d.Close()
	const missing = "0123456789abcdef0123456789abcdef01234567"
	for _, want := range []string{id, missing} {
		d.Fetch(context.Background(), want)
	}
	for _, p := range []string{filepath.Dir(cache), cache, filepath.Join(cache, id), filepath.Join(cache, id, "debuginfo"),
		filepath.Join(cache, missing), filepath.Join(cache, missing, "debuginfo")} {
		fi, err := os.Lstat(p)
		if err != nil {
			t.Errorf("%s: %v", p, err)
			continue
		}
		if st := fi.Sys().(*syscall.Stat_t); st.Uid != uid || st.Gid != gid {
			t.Errorf("%s owned by %d:%d, want %d:%d", p, st.Uid, st.Gid, uid, gid)
		}
	}
}

// A cache that cannot be written is our problem, not the server's: no
// miss is remembered, and the server is asked again.
func TestDebuginfodCacheUnwritable(t *testing.T) {
	_, _, debug, id := debugFixture(t)
	srv := &debugServer{files: map[string][]byte{id: debug}}
	ts := httptest.NewServer(srv)
	defer ts.Close()
	file := filepath.Join(tempDir(t), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	d := NewDebuginfod(DebuginfodConfig{URLs: []string{ts.URL}, CacheDir: filepath.Join(file, "cache"), Timeout: 5 * time.Second})
	defer d.Close()
	for i := 0; i < 2; i++ {
		if path, err := d.Fetch(context.Background(), id); err == nil || errors.Is(err, ErrNoDebuginfo) {
			t.Errorf("Fetch = %q, %v; want an error of the cache", path, err)
		}
	}
	if n := srv.requests.Load(); n != 2 {
		t.Errorf("%d requests, want 2 (the server stays in use)", n)
	}
}

// BenchmarkResolveDebuginfod: warm lookups in a stripped module whose
// debug file came from debuginfod (the module reached through latest)
// against the same file found under a debug directory, side by side.
func BenchmarkResolveDebuginfod(b *testing.B) {
	needTool(b, "gcc")
	needTool(b, "objcopy")
	dir := tempDir(b)
	bin := buildFixture(b, dir, "leak", "-O2", "-g")
	stripped := stripCopy(b, bin, "leak-stripped")
	id := buildIDOf(b, bin)
	debugDir := filepath.Join(dir, "debug")
	dbg := filepath.Join(debugDir, ".build-id", id[:2], id[2:]+".debug")
	cache := filepath.Join(dir, "cache")
	for _, p := range []string{dbg, filepath.Join(cache, id, "debuginfo")} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			b.Fatal(err)
		}
		run(b, "objcopy", "--only-keep-debug", bin, p)
	}
	fx := startFixture(b, stripped)
	addrs := []uint64{fx.addr("LEAK_A"), fx.addr("LEAK_B"), fx.addr("LEAK_C")}
	d := NewDebuginfod(DebuginfodConfig{URLs: []string{"http://127.0.0.1:1"}, CacheDir: cache}) // the cache has it
	defer d.Close()
	for _, bc := range []struct {
		name string
		opts []Option
	}{
		{"debug-dir", []Option{WithDebugDirs(debugDir)}},
		{"debuginfod", []Option{WithDebugDirs(), WithDebuginfod(d)}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			r := NewResolver(bc.opts...)
			defer r.Close()
			if err := r.Capture(fx.pid()); err != nil {
				b.Fatal(err)
			}
			if f := r.Resolve(fx.pid(), addrs[0]); f.Function != "leak_a" {
				b.Fatalf("resolved to %s", showFrame(f))
			}
			for b.Loop() {
				for _, a := range addrs {
					r.Resolve(fx.pid(), a)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(addrs)), "ns/addr")
		})
	}
}

// TestDebuginfodCacheLinks: in a cache a user could write, links and FIFOs
// planted in it are not followed: memtrace writes nothing outside the
// cache, and a FIFO where a debug file should be does not block it.
func TestDebuginfodCacheLinks(t *testing.T) {
	_, _, debug, id := debugFixture(t)
	ts := httptest.NewServer(&debugServer{files: map[string][]byte{id: debug}})
	defer ts.Close()
	const fifoID = "0123456789abcdef0123456789abcdef01234567"
	cache, elsewhere := filepath.Join(tempDir(t), "cache"), tempDir(t)
	if err := os.MkdirAll(filepath.Join(cache, fifoID), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(elsewhere, filepath.Join(cache, id)); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(cache, fifoID, "debuginfo"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := syscall.Mkfifo(filepath.Join(cache, "cache_miss_s"), 0o644); err != nil {
		t.Fatal(err)
	}
	d := NewDebuginfod(DebuginfodConfig{URLs: []string{ts.URL}, CacheDir: cache, Timeout: 5 * time.Second})
	defer d.Close()
	if path, err := d.Fetch(context.Background(), id); err == nil {
		t.Errorf("Fetch through a linked entry = %q, want an error", path)
	}
	if _, err := d.Fetch(context.Background(), fifoID); err == nil {
		t.Errorf("Fetch of an entry holding a FIFO succeeded")
	}
	if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
		t.Errorf("memtrace wrote %d files where the link pointed", len(ents))
	}
	if _, err := d.Fetch(context.Background(), "../../etc"); err == nil {
		t.Error("Fetch of a build-id that is a path succeeded")
	}

	// DEBUGINFOD_CACHE_PATH in a directory anyone can write to, where
	// someone put a link by that name.
	shared := tempDir(t)
	os.Chmod(shared, 0o1777)
	linked := filepath.Join(shared, "cache")
	if err := os.Symlink(elsewhere, linked); err != nil {
		t.Fatal(err)
	}
	d2 := NewDebuginfod(DebuginfodConfig{URLs: []string{ts.URL}, CacheDir: linked, Timeout: 5 * time.Second})
	defer d2.Close()
	if path, err := d2.Fetch(context.Background(), id); err == nil {
		t.Errorf("Fetch into a linked cache in a shared directory = %q, want an error", path)
	}
	if ents, _ := os.ReadDir(elsewhere); len(ents) != 0 {
		t.Errorf("memtrace wrote %d files where the shared link pointed", len(ents))
	}
}
