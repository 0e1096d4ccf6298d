package replay

import (
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/memtrace/memtrace/internal/diff"
	"github.com/memtrace/memtrace/internal/pipeline"
	"github.com/memtrace/memtrace/internal/recording"
)

// ExitGrowth: memtrace diff --fail-on-growth found more growth than allowed
// (the same status as --fail-on-leak).
const ExitGrowth = pipeline.ExitLeak

// DiffConfig holds the flags of memtrace diff.
type DiffConfig struct {
	Old, New  string
	JSON, Raw bool
	// Growth is --fail-on-growth's threshold, when GrowthSet.
	Growth    uint64
	GrowthSet bool
}

// Diff is `memtrace diff`: it returns the exit code.
func Diff(c *DiffConfig, stdout, stderr io.Writer) int {
	files := []string{c.Old, c.New}
	var sides [2]diff.Side
	for i, f := range files {
		s, err := readSide(f, stderr)
		if err != nil {
			fmt.Fprintf(stderr, "memtrace: %s: %v\n", f, err)
			return pipeline.ExitUsage
		}
		sides[i] = s
	}
	res := diff.Compare(sides[0], sides[1])
	var err error
	if c.JSON {
		err = diff.WriteJSON(stdout, res)
	} else {
		err = diff.WriteText(stdout, res, c.Raw)
	}
	if err != nil {
		fmt.Fprintf(stderr, "memtrace: %v\n", err)
		return pipeline.ExitError
	}
	if g := res.Growth(); c.GrowthSet && g > int64(c.Growth) {
		fmt.Fprintf(stderr, "memtrace: live bytes grew by %d, more than --fail-on-growth %d\n", g, c.Growth)
		return ExitGrowth
	}
	return pipeline.ExitOK
}

// readSide reads one side of a diff: NDJSON, or a recording replayed to
// its end, its snapshot compared as data (diff.FromSnapshot).
func readSide(path string, warn io.Writer) (diff.Side, error) {
	f, err := os.Open(path)
	if err != nil {
		return diff.Side{}, err
	}
	defer f.Close()
	head := make([]byte, len(recording.Magic))
	n, _ := io.ReadFull(f, head)
	if string(head[:n]) != recording.Magic {
		if _, err := f.Seek(0, io.SeekStart); err != nil {
			return diff.Side{}, err
		}
		return diff.ReadNDJSON(f)
	}
	rp, err := replay(&ReplayConfig{File: path}, warn)
	if rp == nil {
		return diff.Side{}, err
	}
	if err != nil && !errors.Is(err, recording.ErrTruncated) {
		return diff.Side{}, err
	}
	side := diff.FromSnapshot(rp.snap, rp.res)
	for _, sa := range rp.latestAccess() {
		side.AddAccess(sa.comm, sa.pid, sa.e, rp.res)
	}
	return side, nil
}
