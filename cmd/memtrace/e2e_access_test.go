package main

import (
	"bufio"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// accessRec is an access, access_process or access_block record.
type accessRec struct {
	Type              string  `json:"type"`
	PID               int     `json:"pid"`
	Category          string  `json:"category"`
	Function          string  `json:"function"`
	Address           string  `json:"address"`
	BlockAddress      string  `json:"block_address"`
	SizeBytes         uint64  `json:"size_bytes"`
	LiveBytes         uint64  `json:"live_bytes"`
	TouchedBytes      uint64  `json:"touched_bytes"`
	WrittenBytes      *uint64 `json:"written_bytes"`
	ColdBytes         uint64  `json:"cold_bytes"`
	NeverTouchedBytes uint64  `json:"never_touched_bytes"`
	LastAccessAgeNS   uint64  `json:"last_access_age_ns"`
	Epoch             int     `json:"epoch"`
	EpochNS           uint64  `json:"epoch_ns"`
	Method            string  `json:"method"`
	Final             bool    `json:"final"`
	TimeNS            uint64  `json:"time_ns"`
}

func parseAccess(t *testing.T, out string) []accessRec {
	t.Helper()
	var recs []accessRec
	sc := bufio.NewScanner(strings.NewReader(out))
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var r accessRec
		if err := json.Unmarshal(sc.Bytes(), &r); err != nil {
			t.Fatalf("not JSON: %v: %q", err, sc.Bytes())
		}
		if strings.HasPrefix(r.Type, "access") {
			recs = append(recs, r)
		}
	}
	return recs
}

// TestAccessFixture: testdata/access.c's four sites, each used in a known
// way, read every 200 ms with cold after 3 epochs. Every epoch from the
// 5th (the setup writes are 3 epochs old by then, whenever they fell in
// the first) that ended before the fixture's loop did (its --mark, which
// ends an epoch too) must show each site's figures exact to the page; the
// fixture's output is the same as untraced.
func TestAccessFixture(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "access.c")
	const page = 4096
	untraced, err := exec.Command(bin, "100").Output()
	if err != nil {
		t.Fatal(err)
	}
	report := filepath.Join(t.TempDir(), "report.ndjson")
	res := runMemtrace(t, "-v", "--access=200ms", "--mark=loop_done", "--json", "-o", report, "--", bin, "2500")
	if res.code != 0 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	if res.stdout != string(untraced) {
		t.Errorf("the fixture printed %q traced, %q untraced", res.stdout, untraced)
	}
	if !strings.Contains(res.stderr, "method=pagemap+pte-walk") {
		t.Errorf("-v does not name the method:\n%s", res.stderr)
	}
	out, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	recs := parseAccess(t, string(out))
	var markNS uint64
	for l := range strings.Lines(string(out)) {
		var m struct {
			Type   string `json:"type"`
			TimeNS uint64 `json:"time_ns"`
		}
		if json.Unmarshal([]byte(l), &m) == nil && m.Type == "mark" {
			markNS = m.TimeNS
		}
	}
	if markNS == 0 {
		t.Fatalf("no mark record\n%s", out)
	}
	markEpoch := 0 // the epoch the mark ended
	for _, r := range recs {
		if r.TimeNS >= markNS && (markEpoch == 0 || r.Epoch < markEpoch) {
			markEpoch = r.Epoch
		}
	}
	type figs struct{ live, touched, cold, never uint64 }
	want := map[string]figs{
		"hot_block":   {8 * page, 8 * page, 0, 0},
		"read_block":  {4 * page, 4 * page, 0, 0},
		"once_block":  {6 * page, 0, 6 * page, 0},
		"never_block": {20 * page, 0, 0, 20 * page},
	}
	// Where the kernel keeps soft-dirty bits (Debian's 6.1 and 6.12 in
	// the kernel matrix), the bytes written in each epoch.
	wantWritten := map[string]uint64{"hot_block": 8 * page}
	checked := map[int]int{} // epoch: sites checked
	var final, blocks int
	last := 0
	for _, r := range recs {
		if r.Method != "pagemap+pte-walk" && r.Method != "pagemap+pte-walk+soft-dirty" {
			t.Errorf("method %q", r.Method)
		}
		last = max(last, r.Epoch)
		if r.Final {
			final++
		}
		if r.Type == "access_block" && r.Function == "never_block" && r.Epoch >= 5 && r.Epoch < markEpoch {
			blocks++
			if r.SizeBytes != 20*page || r.NeverTouchedBytes != 20*page || r.TouchedBytes != 0 {
				t.Errorf("epoch %d: never_block's block record %+v", r.Epoch, r)
			}
		}
		w, ok := want[r.Function]
		if r.Type != "access" || !ok || r.Epoch < 5 || r.Epoch >= markEpoch {
			continue
		}
		if r.EpochNS < 150e6 || r.EpochNS > 2e9 {
			t.Errorf("epoch %d lasted %d ns, want about 200 ms", r.Epoch, r.EpochNS)
		}
		got := figs{r.LiveBytes, r.TouchedBytes, r.ColdBytes, r.NeverTouchedBytes}
		if got != w {
			t.Errorf("epoch %d, %s: live %d touched %d cold %d never %d pages, want %d %d %d %d", r.Epoch, r.Function,
				got.live/page, got.touched/page, got.cold/page, got.never/page, w.live/page, w.touched/page, w.cold/page, w.never/page)
		}
		switch {
		case r.Method == "pagemap+pte-walk" && r.WrittenBytes != nil:
			t.Errorf("epoch %d, %s: written %d without soft-dirty, want null", r.Epoch, r.Function, *r.WrittenBytes)
		case r.Method == "pagemap+pte-walk+soft-dirty" && (r.WrittenBytes == nil || *r.WrittenBytes != wantWritten[r.Function]):
			t.Errorf("epoch %d, %s: written %v, want %d pages", r.Epoch, r.Function, r.WrittenBytes, wantWritten[r.Function]/page)
		}
		if r.Function == "once_block" && r.LastAccessAgeNS < 3*150e6 {
			t.Errorf("epoch %d: once_block's last access %d ns ago, want 3 epochs or more", r.Epoch, r.LastAccessAgeNS)
		}
		if (r.Function == "hot_block" || r.Function == "read_block") && r.LastAccessAgeNS != 0 {
			t.Errorf("epoch %d: %s's last access %d ns ago, want 0", r.Epoch, r.Function, r.LastAccessAgeNS)
		}
		checked[r.Epoch]++
	}
	n := 0
	for e, sites := range checked {
		if sites != len(want) {
			t.Errorf("epoch %d: %d of the %d sites", e, sites, len(want))
		}
		n++
	}
	if n < 3 || blocks != n {
		t.Errorf("%d epochs checked (of %d), %d block records: want 3 or more, one each\n%s", n, last, blocks, out)
	}
	if final == 0 {
		t.Errorf("no final access record")
	}
	if markEpoch == last {
		t.Errorf("the mark did not end an epoch of its own: the last, %d, followed it", last)
	}
}

// TestAccessDumpDir: with --dump-dir each access epoch is a numbered dump
// holding that epoch's access records; the last one's are final.
func TestAccessDumpDir(t *testing.T) {
	needBPF(t)
	bin := fixture(t, "access.c")
	dir := t.TempDir()
	res := runMemtrace(t, "--access=200ms", "--dump-dir", dir, "-i", "10s", "-o", os.DevNull, "--", bin, "900")
	if res.code != 0 {
		t.Fatalf("exit %d\n%s", res.code, res.stderr)
	}
	files, err := filepath.Glob(filepath.Join(dir, "memtrace-*.ndjson"))
	if err != nil || len(files) < 3 {
		t.Fatalf("dumps %v (%v), want 3 or more", files, err)
	}
	for i, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		recs := parseAccess(t, string(b))
		if len(recs) == 0 {
			t.Errorf("%s: no access records", f)
		}
		for _, r := range recs {
			if r.Epoch != i+1 || r.Final != (i == len(files)-1) {
				t.Errorf("%s: %s record of epoch %d, final %v", f, r.Type, r.Epoch, r.Final)
			}
		}
	}
}

// TestAccessBadInput: --access's mistakes are usage errors (exit 2) with
// one line saying what is wrong, before anything is loaded.
func TestAccessBadInput(t *testing.T) {
	needBPF(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--access", "-d", "1s"}, "memtrace: usage: --access needs -p PID or a command\n"},
		{[]string{"--access=5ms", "--", "true"}, "memtrace: usage: --access: an epoch of at least 10ms\n"},
		{[]string{"--access", "--cold-after", "0", "--", "true"}, "memtrace: usage: --cold-after: at least 1 epoch\n"},
	} {
		res := runMemtrace(t, tt.args...)
		if res.code != 2 || !strings.HasSuffix(res.stderr, tt.want) || strings.Count(res.stderr, "\n") != 1 {
			t.Errorf("memtrace %v: exit %d, stderr %q; want 2, %q", tt.args, res.code, res.stderr, tt.want)
		}
	}
}
