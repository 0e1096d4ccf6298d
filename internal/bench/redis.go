package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

const redisTimeout = 5 * time.Minute

// redis runs redis-benchmark against a fresh redis-server on 127.0.0.1,
// untraced and with memtrace attached to the server by PID.
func (r *runner) redis(ctx context.Context) ([]*Comparison, error) {
	var cs []*Comparison
	for _, t := range []string{"SET", "GET"} {
		cs = append(cs, &Comparison{
			ID:             "redis-" + strings.ToLower(t),
			Title:          fmt.Sprintf("redis-benchmark -t %s -n %d on 127.0.0.1: requests/s", strings.ToLower(t), r.cfg.RedisRequests),
			Unit:           "req/s",
			Baseline:       rowUntraced,
			HigherIsBetter: true,
		})
	}
	var absent []string
	for _, name := range []string{"redis-server", "redis-benchmark"} {
		if tool(name) == "" {
			absent = append(absent, name)
		}
	}
	missing := ""
	if len(absent) > 0 {
		missing = strings.Join(absent, " and ") + " not installed (membench --install)"
	}
	traced := r.noBPF
	if missing != "" {
		traced = missing
	}
	var detail traceSummary // the last --detail run's
	vs := []workloadVariant{
		{name: rowUntraced, skip: missing, run: func(ctx context.Context) ([]float64, *traceSummary, error) {
			return r.redisOnce(ctx, false)
		}},
		{name: "memtrace -p (exact)", skip: traced, run: func(ctx context.Context) ([]float64, *traceSummary, error) {
			return r.redisOnce(ctx, true)
		}},
		{name: "memtrace -p --detail", skip: traced, run: func(ctx context.Context) ([]float64, *traceSummary, error) {
			vals, sum, err := r.redisOnce(ctx, true, "--detail", "--stack-depth", "64")
			if sum != nil {
				detail = *sum
			}
			return vals, sum, err
		}},
	}
	r.alternate(ctx, cs, vs)
	if detail.liveBytes > 0 {
		cs[0].Notes = append(cs[0].Notes, fmt.Sprintf(
			"--detail: %.1f%% of the live bytes at the end have a stack reaching the thread's first function (target >= 95%%); top call sites by live bytes: %s",
			100*float64(detail.completeLiveBytes)/float64(detail.liveBytes), strings.Join(detail.topFunctions(5), ", ")))
	}
	return cs, nil
}

// redisOnce starts a server, optionally attaches memtrace to it, runs the
// benchmark and returns SET's and GET's requests per second.
func (r *runner) redisOnce(ctx context.Context, traced bool, modeArgs ...string) ([]float64, *traceSummary, error) {
	ctx, cancel := context.WithTimeout(ctx, redisTimeout)
	defer cancel()
	port, err := freePort()
	if err != nil {
		return nil, nil, err
	}
	// No persistence: the benchmark must not measure the disk.
	srv := command(ctx, "redis-server", "--port", port, "--bind", "127.0.0.1",
		"--save", "", "--appendonly", "no", "--daemonize", "no")
	var srvOut bytes.Buffer
	srv.Stdout, srv.Stderr = &srvOut, &srvOut
	if err := srv.Start(); err != nil {
		return nil, nil, fmt.Errorf("start redis-server: %w", err)
	}
	defer func() {
		killGroup(srv)
		_ = srv.Wait()
	}()
	if err := waitRedis(ctx, port); err != nil {
		return nil, nil, fmt.Errorf("%w%s", err, tail(srvOut.String()))
	}
	var t *tracing
	trace := filepath.Join(r.tmp, "redis.ndjson")
	if traced {
		defer os.Remove(trace)
		args := append([]string{"--json", "--top", "0", "-o", trace, "-v", "-p", strconv.Itoa(srv.Process.Pid)}, modeArgs...)
		t, _, err = startTracing(ctx, r.memtrace, args...)
		if err != nil {
			return nil, nil, err
		}
		defer t.kill()
	}
	o, err := run(ctx, redisTimeout, "redis-benchmark", "-h", "127.0.0.1", "-p", port,
		"-n", strconv.Itoa(r.cfg.RedisRequests), "-t", "set,get", "-q")
	if err != nil {
		return nil, nil, err
	}
	vals, err := parseRedisBenchmark(o.stdout)
	if err != nil || !traced {
		return vals, nil, err
	}
	if err := t.interrupt(ctx); err != nil {
		return nil, nil, err
	}
	sum, err := readTraceSummary(trace)
	return vals, &sum, err
}

// freePort asks the kernel for a free port on 127.0.0.1.
func freePort() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", fmt.Errorf("find a free port: %w", err)
	}
	defer l.Close()
	return strconv.Itoa(l.Addr().(*net.TCPAddr).Port), nil
}

// waitRedis waits until the server answers PING.
func waitRedis(ctx context.Context, port string) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) && ctx.Err() == nil {
		c, err := net.DialTimeout("tcp", "127.0.0.1:"+port, time.Second)
		if err == nil {
			c.SetDeadline(time.Now().Add(time.Second))
			fmt.Fprint(c, "PING\r\n")
			line, _ := bufio.NewReader(c).ReadString('\n')
			c.Close()
			if strings.HasPrefix(line, "+PONG") {
				return nil
			}
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("redis-server on port %s did not answer PING within 10s", port)
}

var redisRate = regexp.MustCompile(`(SET|GET): ([0-9.]+) requests per second`)

// parseRedisBenchmark reads -q output ("SET: 98765.43 requests per
// second, p50=…"; progress lines end in \r).
func parseRedisBenchmark(out string) ([]float64, error) {
	got := map[string]float64{}
	for _, m := range redisRate.FindAllStringSubmatch(out, -1) {
		v, err := strconv.ParseFloat(m[2], 64)
		if err != nil {
			return nil, fmt.Errorf("redis-benchmark printed %q: %w", m[0], err)
		}
		got[m[1]] = v
	}
	set, okSet := got["SET"]
	get, okGet := got["GET"]
	if !okSet || !okGet {
		return nil, fmt.Errorf("redis-benchmark printed no SET and GET rates%s", tail(out))
	}
	return []float64{set, get}, nil
}
