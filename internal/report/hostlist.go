package report

import (
	"bytes"
	"cmp"
	"fmt"
	"slices"
	"strconv"

	"github.com/olekukonko/tablewriter/tw"

	"github.com/memtrace/memtrace/internal/aggregate"
)

// The whole host's process list: every process on the host (those
// memtrace met no event of too, aggregate.ProcessSnapshot.Untraced),
// ranked by a footprint key, with the kernel's figures beside what the
// run's sampled faults made resident.

// The footprint keys rank processes by a figure of their footprint; call
// sites rank as by SortRSS (heap sites by live bytes, mmap sites by
// resident bytes).
const (
	// SortAnon ranks processes by their anonymous RSS (RssAnon).
	SortAnon SortKey = "anon"
	// SortSwap ranks processes by their memory swapped out (VmSwap).
	SortSwap SortKey = "swap"
	// SortPSS ranks processes by their proportional set size.
	SortPSS SortKey = "pss"
	// SortResident ranks processes by what the run's sampled faults made
	// resident (~RESIDENT).
	SortResident SortKey = "resident"
)

// footprintKeys are the keys that rank by a footprint figure, in the
// order the live view cycles through them.
var footprintKeys = []SortKey{SortRSS, SortAnon, SortPSS, SortSwap, SortResident}

// ranksFootprint says whether k ranks processes by a footprint figure.
func (k SortKey) ranksFootprint() bool { return slices.Contains(footprintKeys, k) }

// HostKey is the key a whole host's process list is ranked by: k if it
// is a footprint key, else RSS.
func HostKey(k SortKey) SortKey {
	if k.ranksFootprint() {
		return k
	}
	return SortRSS
}

// FootprintKeys returns the footprint keys, for the live view's whole
// host table.
func FootprintKeys() []SortKey { return slices.Clone(footprintKeys) }

// footprintValue is p's figure for the footprint key k (0 without a
// reading).
func footprintValue(p aggregate.ProcessSnapshot, k SortKey) uint64 {
	if k == SortResident {
		if p.Resident == nil {
			return 0
		}
		return p.Resident.Bytes
	}
	f := p.Footprint
	if f == nil {
		return 0
	}
	switch k {
	case SortAnon:
		return f.RSSAnon
	case SortSwap:
		return f.Swap
	case SortPSS:
		return f.PSS
	}
	return f.RSS
}

// RankHost returns procs ranked by HostKey(k), largest first; ties go to
// the larger RSS, then resident, then live bytes, then the lower PID, so
// that the order never changes between equal reports.
func RankHost(procs []aggregate.ProcessSnapshot, k SortKey) []aggregate.ProcessSnapshot {
	k = HostKey(k)
	out := slices.Clone(procs)
	slices.SortStableFunc(out, func(a, b aggregate.ProcessSnapshot) int {
		return cmp.Or(
			cmp.Compare(footprintValue(b, k), footprintValue(a, k)),
			cmp.Compare(footprintValue(b, SortRSS), footprintValue(a, SortRSS)),
			cmp.Compare(footprintValue(b, SortResident), footprintValue(a, SortResident)),
			cmp.Compare(b.Heap.LiveBytes+b.Mapped.LiveBytes, a.Heap.LiveBytes+a.Mapped.LiveBytes),
			cmp.Compare(a.PID, b.PID),
		)
	})
	return out
}

// describeHost says in words what a host list ranked by k is ranked by.
func describeHost(k SortKey) string {
	switch HostKey(k) {
	case SortAnon:
		return "anonymous RSS"
	case SortSwap:
		return "swap"
	case SortPSS:
		return "PSS"
	case SortResident:
		return "memory made resident while traced"
	}
	return "RSS"
}

// hostListColumns are the list's footprint columns: the kernel's figures.
var hostListColumns = []any{"RSS", "ANON", "FILE", "SHMEM", "SWAP", "PSS"}

// writeHostList prints the whole host's process list: each listed
// process's footprint ("-" without a reading: it exited before its
// first), then, when the run samples faults, what they made resident
// ("-": no fault of it sampled while traced).
func writeHostList(b *bytes.Buffer, v hostView, o Options) error {
	if v.totalListed == 0 {
		return nil
	}
	resident := o.ResidentOnly
	for _, p := range v.listed {
		resident = resident || p.Resident != nil
	}
	what := "processes"
	if o.Exited {
		what = "processes that exited"
	}
	title := what + " by " + describeHost(v.listKey)
	foot := anyFootprint(v.listed) // footprint.go
	if resident {
		mean := uint64(0)
		for _, p := range v.listed {
			if p.Resident != nil {
				mean = p.Resident.SampleBytes
				break
			}
		}
		if mean > 0 {
			title += " (1 write fault sampled per " + byteText(mean, o.Raw) + " of faults)"
		}
	}
	fmt.Fprintf(b, "\n%s\n", shownOf(title, len(v.listed), v.totalListed))
	head := []any{"PID", "COMM"}
	align := []tw.Align{tw.AlignRight, tw.AlignLeft}
	if foot {
		head = append(head, hostListColumns...)
		align = append(align, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight, tw.AlignRight)
	}
	if resident {
		head = append(head, estMark+"RESIDENT", "± RESIDENT", "PAGES")
		align = append(align, tw.AlignRight, tw.AlignRight, tw.AlignRight)
	}
	var out bytes.Buffer
	t := hostTable(&out, align)
	t.Header(head...)
	for _, p := range v.listed {
		row := []string{strconv.FormatUint(uint64(p.PID), 10), commLabel(p.Comm)}
		if f := p.Footprint; !foot {
		} else if f != nil && f.RSS > 0 {
			for _, n := range []uint64{f.RSS, f.RSSAnon, f.RSSFile, f.RSSShmem, f.Swap, f.PSS} {
				row = append(row, byteCell(n, o.Raw))
			}
		} else {
			row = append(row, "-", "-", "-", "-", "-", "-")
		}
		if resident {
			if r := p.Resident; r != nil {
				row = append(row, byteCell(r.Bytes, o.Raw), byteCell(roundStderr(r.Stderr), o.Raw), strconv.FormatUint(r.Pages, 10))
			} else {
				row = append(row, "-", "-", "-")
			}
		}
		if err := t.Append(row); err != nil {
			return fmt.Errorf("add process %d: %w", p.PID, err)
		}
	}
	if err := t.Render(); err != nil {
		return fmt.Errorf("render processes: %w", err)
	}
	indentTable(b, out.String())
	if foot {
		b.WriteString("   RSS to PSS: the kernel's figures, now (a process that exited: at its last reading)\n")
	}
	if resident {
		b.WriteString("   ~RESIDENT: only what became resident while memtrace watched, from sampled write faults; - none sampled\n")
	}
	// An exited process's resident figures are as of its last pagemap check.
	for _, p := range v.listed {
		if p.Exited && p.Resident != nil {
			fmt.Fprintf(b, "   pid %d %s: %s\n", p.PID, commLabel(p.Comm), checkedText(p.Resident.CheckedNS, p.ExitTime))
		}
	}
	return nil
}
