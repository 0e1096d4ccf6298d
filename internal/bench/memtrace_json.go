package bench

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"sort"
)

// traceSummary is what the harness reads from memtrace's final NDJSON
// process records (docs/json.md).
type traceSummary struct {
	lost   uint64 // lost_events, summed over processes
	events uint64 // allocs + frees (heap) and maps + unmaps, summed
	allocs uint64 // allocation calls, summed over processes
	// Final heap call sites: live bytes, those whose --detail stack is
	// complete, and the functions holding the most.
	liveBytes, completeLiveBytes uint64
	liveByFunction               map[string]uint64
}

// topFunctions are the n functions holding the most live bytes.
func (s traceSummary) topFunctions(n int) []string {
	var fns []string
	for fn := range s.liveByFunction {
		fns = append(fns, fn)
	}
	sort.Slice(fns, func(i, j int) bool { return s.liveByFunction[fns[i]] > s.liveByFunction[fns[j]] })
	return fns[:min(n, len(fns))]
}

// readTraceSummary reads memtrace's --json output file.
func readTraceSummary(path string) (traceSummary, error) {
	f, err := os.Open(path)
	if err != nil {
		return traceSummary{}, fmt.Errorf("read memtrace's JSON: %w", err)
	}
	defer f.Close()
	var s traceSummary
	finals := 0
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var rec struct {
			Type       string `json:"type"`
			Final      bool   `json:"final"`
			LostEvents uint64 `json:"lost_events"`
			Allocs     uint64 `json:"allocs"`
			Frees      uint64 `json:"frees"`
			Category   string `json:"category"`
			Function   string `json:"function"`
			LiveBytes  uint64 `json:"live_bytes"`
			Truncated  *bool  `json:"stack_truncated"`
			Mmap       struct {
				Maps   uint64 `json:"maps"`
				Unmaps uint64 `json:"unmaps"`
			} `json:"mmap"`
		}
		if err := json.Unmarshal(sc.Bytes(), &rec); err != nil {
			return s, fmt.Errorf("read memtrace's JSON: %w", err)
		}
		if rec.Type == "callsite" && rec.Final && rec.Category == "heap" {
			if s.liveByFunction == nil {
				s.liveByFunction = map[string]uint64{}
			}
			s.liveByFunction[rec.Function] += rec.LiveBytes
			s.liveBytes += rec.LiveBytes
			if rec.Truncated != nil && !*rec.Truncated {
				s.completeLiveBytes += rec.LiveBytes
			}
		}
		if rec.Type != "process" || !rec.Final {
			continue
		}
		finals++
		s.lost += rec.LostEvents
		s.events += rec.Allocs + rec.Frees + rec.Mmap.Maps + rec.Mmap.Unmaps
		s.allocs += rec.Allocs
	}
	if err := sc.Err(); err != nil {
		return s, fmt.Errorf("read memtrace's JSON: %w", err)
	}
	if finals == 0 {
		return s, fmt.Errorf("memtrace's JSON in %s has no final process record", path)
	}
	return s, nil
}
