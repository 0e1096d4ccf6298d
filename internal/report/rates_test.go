package report

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/memtrace/memtrace/internal/aggregate"
)

var rateFields = []string{"half_life_s", "alloc_bytes_per_s", "free_bytes_per_s", "net_bytes_per_s", "allocs_per_s", "frees_per_s"}

func rates(per ...[5]float64) []aggregate.RateSnapshot {
	hl := []time.Duration{time.Second, 10 * time.Second, 100 * time.Second}
	var out []aggregate.RateSnapshot
	for i, v := range per {
		out = append(out, aggregate.RateSnapshot{HalfLife: hl[i], AllocBytesPerSec: v[0], FreedBytesPerSec: v[1],
			NetBytesPerSec: v[0] - v[1], AllocsPerSec: v[3], FreesPerSec: v[4]})
	}
	return out
}

// rateProcess is twoSiteProcess while make_buffer leaks at 1 MiB/s and
// parse_request has stopped and is draining (negative net rate).
func rateProcess() aggregate.ProcessSnapshot {
	p := twoSiteProcess()
	mk := rates([5]float64{1 * MiB, 0, 0, 10, 0}, [5]float64{900 * KiB, 0, 0, 9, 0}, [5]float64{300 * KiB, 0, 0, 3, 0})
	parse := rates([5]float64{0, 64 * KiB, 0, 0, 128}, [5]float64{10 * KiB, 20 * KiB, 0, 20, 40}, [5]float64{5 * KiB, 5 * KiB, 0, 10, 10})
	for i := range p.Sites {
		if p.Sites[i].Address == addrMakeBuffer {
			p.Sites[i].Rates = mk
		} else {
			p.Sites[i].Rates = parse
		}
	}
	for i := range mk {
		p.Rates = append(p.Rates, aggregate.RateSnapshot{HalfLife: mk[i].HalfLife,
			AllocBytesPerSec: mk[i].AllocBytesPerSec + parse[i].AllocBytesPerSec,
			FreedBytesPerSec: mk[i].FreedBytesPerSec + parse[i].FreedBytesPerSec,
			NetBytesPerSec:   mk[i].NetBytesPerSec + parse[i].NetBytesPerSec,
			AllocsPerSec:     mk[i].AllocsPerSec + parse[i].AllocsPerSec,
			FreesPerSec:      mk[i].FreesPerSec + parse[i].FreesPerSec})
	}
	return p
}

// TestRatesGolden pins the rates block of the text header, the NET/S
// column of --sort rate, and the "rates" arrays of NDJSON. Regenerate with
// go test ./report/ -run TestRatesGolden -update.
func TestRatesGolden(t *testing.T) {
	for _, tt := range []struct {
		file string
		o    Options
		json bool
	}{
		{"rates_sort_rate.txt", Options{Top: DefaultTop, Sort: SortRate}, false},
		{"rates_raw.txt", Options{Top: DefaultTop, Raw: true, Final: true}, false},
		{"rates.ndjson", Options{Top: DefaultTop, Sort: SortRate}, true},
	} {
		t.Run(tt.file, func(t *testing.T) {
			var b bytes.Buffer
			write := WriteText
			if tt.json {
				write = WriteJSON
			}
			if err := write(&b, snapshotOf(0, rateProcess()), fixtureSymbols, tt.o); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, tt.file, b.Bytes())
		})
	}
}

func TestSortRate(t *testing.T) {
	k, err := ParseSortKey("rate")
	if err != nil || k != SortRate {
		t.Fatalf("ParseSortKey(rate) = %q, %v", k, err)
	}
	if _, err := ParseSortKey("bogus"); err == nil || !strings.Contains(err.Error(), "rate") {
		t.Errorf("the error does not list rate: %v", err)
	}
	p := rateProcess()
	// A third site with no rates at all (newer than the last tick): 0, so
	// between the growing and the shrinking one.
	p.Sites = append(p.Sites, aggregate.SiteSnapshot{Address: 0x999, Stats: aggregate.Stats{LiveBytes: 50 * MiB}})
	quiet := aggregate.ProcessSnapshot{PID: 1, Rates: rates([5]float64{5, 0, 0, 1, 0})}
	busy := aggregate.ProcessSnapshot{PID: 2, Rates: rates([5]float64{5 * MiB, 0, 0, 1, 0})}
	got := rank(snapshotOf(0, quiet, p, busy), Options{Sort: SortRate})
	var order []uint32
	for _, rp := range got {
		order = append(order, rp.PID)
	}
	if !slices.Equal(order, []uint32{2, 4242, 1}) {
		t.Errorf("process order by rate %v, want [2 4242 1]", order)
	}
	var sites []uint64
	for _, s := range got[1].heap {
		sites = append(sites, s.Address)
	}
	if !slices.Equal(sites, []uint64{addrMakeBuffer, 0x999, addrParse}) {
		t.Errorf("site order by net rate %#x, want make_buffer, the rateless site, parse_request", sites)
	}
}

func TestRateRecordsMatchDocs(t *testing.T) {
	if got := jsonTags(rateRecord{}); !slices.Equal(got, rateFields) {
		t.Errorf("rate record tags %v, want %v", got, rateFields)
	}
	doc, err := readDoc()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range rateFields {
		if !strings.Contains(doc, "`rates[]."+f+"`") {
			t.Errorf("docs/json.md does not document `rates[].%s`", f)
		}
	}
	lines := jsonLines(t, snapshotOf(0, rateProcess()), fixtureSymbols, Options{})
	for _, l := range lines[1:] {
		var r struct {
			Rates []json.RawMessage `json:"rates"`
		}
		if err := json.Unmarshal([]byte(l), &r); err != nil {
			t.Fatal(err)
		}
		if len(r.Rates) != 3 {
			t.Fatalf("want 3 rates: %s", l)
		}
		for _, raw := range r.Rates {
			if got := objectKeys(t, raw); !slices.Equal(got, rateFields) {
				t.Errorf("rate fields %v, want %v", got, rateFields)
			}
		}
	}
}

func TestDecimal(t *testing.T) {
	for _, tt := range []struct {
		d    decimal
		want string
	}{
		{decimal{10485760, 3}, "10485760"},
		{decimal{10485759.999999998, 3}, "10485760"},
		{decimal{0.5, -1}, "0.5"},
		{decimal{0.1, -1}, "0.1"},
		{decimal{-3.25, 3}, "-3.25"},
		{decimal{-0.0001, 3}, "0"},
		{decimal{1e-9, 3}, "0"},
		{decimal{1e22, 3}, "10000000000000000000000"},
		{decimal{0.0001220703125, -1}, "0.0001220703125"},
	} {
		b, _ := tt.d.MarshalJSON()
		if string(b) != tt.want {
			t.Errorf("%v: got %s, want %s", tt.d, b, tt.want)
		}
	}
}

func TestTextRatesBlock(t *testing.T) {
	var b bytes.Buffer
	if err := WriteText(&b, snapshotOf(0, rateProcess()), fixtureSymbols, Options{}); err != nil {
		t.Fatal(err)
	}
	out := b.String()
	for _, want := range []string{
		"  rates:       half-life  allocated/s   freed/s      net/s  allocs/s  frees/s\n",
		"                      1s      1.0 MiB  64.0 KiB  960.0 KiB      10.0    128.0\n",
		"                    100s    305.0 KiB   5.0 KiB  300.0 KiB      13.0     10.0\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("text report lacks %q:\n%s", want, out)
		}
	}
	// Without rates (no Table.SetHalfLives) the block is not printed.
	b.Reset()
	WriteText(&b, snapshotOf(0, twoSiteProcess()), fixtureSymbols, Options{})
	if strings.Contains(b.String(), "rates:") {
		t.Errorf("rates block without rates:\n%s", b.String())
	}
}
