package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/memtrace/memtrace/internal/testwait"
)

// finalFootprint returns the last process record of an NDJSON output
// mixed with a traced program's own lines.
func finalFootprint(t *testing.T, out string) footprintFields {
	t.Helper()
	var p footprintFields
	found := false
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if !strings.HasPrefix(sc.Text(), `{"type":"process"`) {
			continue
		}
		if err := json.Unmarshal(sc.Bytes(), &p); err != nil {
			t.Fatal(err)
		}
		found = true
	}
	if !found || p.Footprint.RSS == 0 {
		t.Fatalf("no process record with a footprint:\n%s", out)
	}
	return p
}

// within checks |got - want| <= pct% of want.
func within(t *testing.T, what string, got, want uint64, pct float64) {
	t.Helper()
	d := float64(got) - float64(want)
	if d < 0 {
		d = -d
	}
	if want == 0 || d > float64(want)*pct/100 {
		t.Errorf("%s: memtrace %d, reference %d: %.1f%% apart, more than %.0f%%", what, got, want, 100*d/float64(want), pct)
	} else {
		t.Logf("%s: memtrace %d, reference %d (%.2f%% apart)", what, got, want, 100*d/float64(want))
	}
}

func checkUnexplained(t *testing.T, p footprintFields) {
	t.Helper()
	f := p.Footprint
	if f.Unexplained*50 > f.RSS {
		t.Errorf("unexplained %d > 2%% of RSS %d", f.Unexplained, f.RSS)
	}
	t.Logf("unexplained %d of RSS %d (%.2f%%)", f.Unexplained, f.RSS, 100*float64(f.Unexplained)/float64(f.RSS))
}

// TestFootprintJVM compares the mappings' reserved and committed bytes
// with the JVM's own Native Memory Tracking summary of the same run, which
// it prints at exit, just before memtrace reads the process at its exit stop.
func TestFootprintJVM(t *testing.T) {
	needBPF(t)
	needTools(t, "java", "javac")
	dir := t.TempDir()
	src := filepath.Join("..", "..", "testdata", "FootprintHello.java")
	if out, err := exec.Command("javac", "-d", dir, src).CombinedOutput(); err != nil {
		t.Fatalf("javac: %v\n%s", err, out)
	}
	r := runMemtrace(t, "--json", "--", "java", "-XX:NativeMemoryTracking=summary",
		"-XX:+UnlockDiagnosticVMOptions", "-XX:+PrintNMTStatistics", "-cp", dir, "FootprintHello")
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	// NMT's total line for mappings: "mmap:   reserved=N, committed=N".
	m := regexp.MustCompile(`(?m)^\s+mmap:\s+reserved=(\d+), committed=(\d+)`).FindStringSubmatch(r.stdout)
	if m == nil {
		t.Fatalf("no NMT summary in the output:\n%s", r.stdout)
	}
	reserved, _ := strconv.ParseUint(m[1], 10, 64)
	committed, _ := strconv.ParseUint(m[2], 10, 64)
	p := finalFootprint(t, r.stdout)
	within(t, "reserved", p.Mmap.Reserved, reserved, 5)
	within(t, "committed", p.Mmap.Committed, committed, 10)
	checkUnexplained(t, p)
}

// TestFootprintRedis attaches to Debian's redis-server (jemalloc) holding
// 100 000 keys and compares the footprint with redis's INFO memory, read
// right after memtrace's reading.
func TestFootprintRedis(t *testing.T) {
	needBPF(t)
	needTools(t, "redis-server")
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	srv := exec.Command("redis-server", "--port", strconv.Itoa(port), "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no")
	if err := srv.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { srv.Process.Kill(); srv.Wait() }()
	var conn net.Conn
	testwait.For(t, "redis-server to answer", func() bool {
		conn, err = net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", port))
		return err == nil
	})
	defer conn.Close()
	rd := bufio.NewReader(conn)
	const keys = 100000
	value := strings.Repeat("v", 1000)
	w := bufio.NewWriter(conn)
	go func() {
		for i := range keys {
			fmt.Fprintf(w, "SET key:%d %s\r\n", i, value)
		}
		w.Flush()
	}()
	for i := range keys {
		if l, err := rd.ReadString('\n'); err != nil || l != "+OK\r\n" {
			t.Fatalf("SET %d: %q %v", i, l, err)
		}
	}
	r := runMemtrace(t, "--json", "-d", "1s", "-p", strconv.Itoa(srv.Process.Pid))
	fmt.Fprintf(conn, "INFO memory\r\n")
	info := map[string]uint64{}
	head, _ := rd.ReadString('\n') // $<length>
	n, _ := strconv.Atoi(strings.TrimSpace(strings.TrimPrefix(head, "$")))
	body := make([]byte, n+2)
	if _, err := io.ReadFull(rd, body); err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(string(body), "\r\n") {
		k, v, _ := strings.Cut(l, ":")
		if x, err := strconv.ParseUint(v, 10, 64); err == nil {
			info[k] = x
		}
	}
	if r.code != 0 {
		t.Fatalf("exit %d\n%s", r.code, r.stderr)
	}
	p := finalFootprint(t, r.stdout)
	within(t, "heap resident vs allocator_resident", p.Footprint.HeapResident, info["allocator_resident"], 15)
	within(t, "RSS vs used_memory_rss", p.Footprint.RSS, info["used_memory_rss"], 5)
	checkUnexplained(t, p)
}
