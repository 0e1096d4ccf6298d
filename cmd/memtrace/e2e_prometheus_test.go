package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/testwait"
)

// TestPrometheus: a real Prometheus server scrapes memtrace --listen while
// it traces testdata/exports_phases.c; the values it stores equal memtrace's final
// JSON (the fixture is idle from "ready" to its exit).
func TestPrometheus(t *testing.T) {
	needBPF(t)
	promBin := needPrometheus(t)
	bin := fixture(t, "exports_phases.c")
	dir := t.TempDir()
	mtAddr := freePort(t)

	report := filepath.Join(dir, "report.json")
	mt, stdin := startListening(t, mtAddr, "--json", "-o", report, "--", bin, "wait")
	promAddr, promLog := startPrometheus(t, promBin, dir, mtAddr)

	// A scrape of what memtrace served after the fixture went idle (it
	// printed "ready" before startListening returned): memtrace refreshes
	// what it serves every second (pipeline's metricsEvery), so a sample
	// stamped more than that after "ready" holds the idle totals.
	idle := float64(time.Now().Add(1500*time.Millisecond).UnixMilli()) / 1000
	promWait(t, promAddr, promLog, "a scrape of memtrace after the fixture went idle", "timestamp(memtrace_live_bytes)",
		func(r []promSample) bool { return len(r) == 1 && r[0].value >= idle })
	metrics := []string{"memtrace_live_bytes", "memtrace_live_blocks", "memtrace_allocations_total",
		"memtrace_allocated_bytes_total", "memtrace_frees_total", "memtrace_freed_bytes_total",
		"memtrace_peak_live_bytes", "memtrace_lost_events_total", `memtrace_callsite_live_bytes{function="grow"}`,
		`memtrace_callsite_live_bytes{function="settle"}`}
	got := map[string]promSample{}
	for _, m := range metrics {
		r := promQuery(t, promAddr, m)
		if len(r) != 1 {
			t.Fatalf("%s: %d series, want 1: %v", m, len(r), r)
		}
		got[m] = r[0]
	}
	rates := promQuery(t, promAddr, "memtrace_rate_bytes_per_second")
	if len(rates) != 9 { // 3 half-lives x allocated, freed, net
		t.Errorf("memtrace_rate_bytes_per_second: %d series, want 9: %v", len(rates), rates)
	}

	stdin.Close()
	if err := mt.Wait(); err != nil {
		t.Fatalf("memtrace: %v", err)
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	rep := parseNDJSON(t, string(b))
	p := rep.finalProcess(t)
	sites := rep.byFunction(p.PID)
	want := map[string]uint64{
		"memtrace_live_bytes": p.LiveBytes, "memtrace_live_blocks": p.LiveAllocs,
		"memtrace_allocations_total": p.Allocs, "memtrace_allocated_bytes_total": p.AllocBytes,
		"memtrace_frees_total": p.Frees, "memtrace_freed_bytes_total": p.FreedBytes,
		"memtrace_peak_live_bytes": p.PeakLiveBytes, "memtrace_lost_events_total": p.LostEvents,
		`memtrace_callsite_live_bytes{function="grow"}`:   sites["heap:grow"].LiveBytes,
		`memtrace_callsite_live_bytes{function="settle"}`: sites["heap:settle"].LiveBytes,
	}
	for _, m := range metrics {
		s := got[m]
		if s.value != float64(want[m]) {
			t.Errorf("%s = %v in Prometheus, %d in the JSON", m, s.value, want[m])
		}
		if s.labels["pid"] != strconv.Itoa(p.PID) || s.labels["comm"] != p.Comm || s.labels["job"] != "memtrace" {
			t.Errorf("%s labels %v", m, s.labels)
		}
	}
	if want["memtrace_live_bytes"] < 1040960 {
		t.Errorf("JSON live bytes %d: the fixture keeps at least 1040960", want["memtrace_live_bytes"])
	}
}

type promSample struct {
	labels map[string]string
	value  float64
}

// promWait runs query q until its result satisfies cond (what), and
// returns that result; Prometheus's log is shown if the test fails.
func promWait(t *testing.T, addr, logPath, what, q string, cond func([]promSample) bool) []promSample {
	t.Helper()
	var r []promSample
	var err error
	t.Cleanup(func() {
		if t.Failed() {
			log, _ := os.ReadFile(logPath)
			t.Logf("last query %q: %v %v; Prometheus's log:\n%s", q, r, err, log)
		}
	})
	testwait.For(t, what, func() bool {
		r, err = promTry(addr, q)
		return err == nil && cond(r)
	})
	return r
}

// promQuery runs an instant query through Prometheus's HTTP API and fails
// the test on an error (promTry's).
func promQuery(t *testing.T, addr, q string) []promSample {
	t.Helper()
	out, err := promTry(addr, q)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// promTry runs an instant query through Prometheus's HTTP API. A server
// starting up refuses the connection, then answers 503 with a text body
// until its storage is ready: both are errors, for a wait to retry.
func promTry(addr, q string) ([]promSample, error) {
	resp, err := http.Get("http://" + addr + "/api/v1/query?query=" + url.QueryEscape(q))
	if err != nil {
		return nil, fmt.Errorf("query %q: %w", q, err)
	}
	defer resp.Body.Close()
	var body struct {
		Status string `json:"status"`
		Data   struct {
			Result []struct {
				Metric map[string]string `json:"metric"`
				Value  [2]any            `json:"value"`
			} `json:"result"`
		} `json:"data"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&body); err != nil {
		return nil, fmt.Errorf("query %q: %s: decode: %w", q, resp.Status, err)
	}
	if body.Status != "success" {
		return nil, fmt.Errorf("query %q: %s: status %q", q, resp.Status, body.Status)
	}
	var out []promSample
	for _, r := range body.Data.Result {
		s, _ := r.Value[1].(string)
		v, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return nil, fmt.Errorf("query %q: value: %w", q, err)
		}
		out = append(out, promSample{r.Metric, v})
	}
	return out, nil
}

// needPrometheus returns the path of Debian's prometheus, skipping the
// test without it (failing it under CI).
func needPrometheus(t *testing.T) string {
	t.Helper()
	promBin, err := exec.LookPath("prometheus")
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true but prometheus is not installed (.ci/run installs it)")
		}
		t.Skip("prometheus is not installed (apt-get install prometheus)")
	}
	return promBin
}

// startListening starts memtrace --listen addr with args, running a
// fixture that prints "ready" then waits for its stdin to close, and
// returns once the fixture is ready; stdin closes the fixture's.
func startListening(t *testing.T, addr string, args ...string) (mt *exec.Cmd, stdin io.WriteCloser) {
	t.Helper()
	mt = exec.Command(memtrace(t), append([]string{"--listen", addr}, args...)...)
	stdin, _ = mt.StdinPipe()
	stdout, _ := mt.StdoutPipe()
	mt.Stderr = os.Stderr
	if err := mt.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mt.Process.Kill() })
	lines := bufio.NewReader(stdout)
	expectLine(t, lines, "ready")
	go io.Copy(io.Discard, lines)
	return mt, stdin
}

// startPrometheus runs a Prometheus server scraping mtAddr every second,
// its data in dir, and returns its address and its log's path.
func startPrometheus(t *testing.T, promBin, dir, mtAddr string) (addr, logPath string) {
	t.Helper()
	addr = freePort(t)
	cfg := filepath.Join(dir, "prometheus.yml")
	os.WriteFile(cfg, []byte(fmt.Sprintf("global:\n  scrape_interval: 1s\nscrape_configs:\n  - job_name: memtrace\n    static_configs:\n      - targets: ['%s']\n", mtAddr)), 0o644)
	prom := exec.Command(promBin, "--config.file="+cfg, "--storage.tsdb.path="+filepath.Join(dir, "tsdb"),
		"--web.listen-address="+addr)
	logPath = filepath.Join(dir, "prometheus.log")
	promLog, _ := os.Create(logPath)
	prom.Stdout, prom.Stderr = promLog, promLog
	if err := prom.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		prom.Process.Kill()
		prom.Wait()
		promLog.Close()
	})
	return addr, logPath
}

// freePort returns a loopback address with a port free a moment ago.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
