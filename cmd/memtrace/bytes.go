package main

import (
	"fmt"
	"strconv"
	"strings"
)

// byteUnits are the suffixes parseBytes accepts, in any case: binary
// units, as the kernel and the reports use. The longer ones come first.
var byteUnits = []struct {
	suffix string
	mult   uint64
}{
	{"kib", 1 << 10}, {"mib", 1 << 20}, {"gib", 1 << 30},
	{"k", 1 << 10}, {"m", 1 << 20}, {"g", 1 << 30}, {"b", 1},
}

// parseBytes reads a byte count, the one form every flag that takes bytes
// accepts (docs/cli.md, "Byte counts"): a whole number, optionally followed by
// B, K/KiB, M/MiB or G/GiB in any case (binary units), with or without a
// space: 65536, 64K, 64kib, 1 MiB, 2g.
func parseBytes(s string) (uint64, error) {
	t := strings.TrimSpace(s)
	low := strings.ToLower(t)
	mult := uint64(1)
	for _, u := range byteUnits {
		if strings.HasSuffix(low, u.suffix) {
			t, mult = t[:len(t)-len(u.suffix)], u.mult
			break
		}
	}
	n, err := strconv.ParseUint(strings.TrimSpace(t), 10, 64)
	if err != nil || n > ^uint64(0)/mult {
		return 0, fmt.Errorf("not a byte count: %q (write e.g. 65536, 64K or 1MiB)", s)
	}
	return n * mult, nil
}

// byteSize is a flag taking a byte count (parseBytes), at most max when
// max is not 0.
type byteSize struct {
	n   *uint64
	set *bool
	max uint64
}

// String gives the count in the largest unit that holds it whole (64K,
// 64M), as --help shows a default; a form parseBytes reads back.
func (b byteSize) String() string {
	if b.n == nil {
		return ""
	}
	return formatBytes(*b.n)
}

func formatBytes(n uint64) string {
	for _, u := range []struct {
		suffix string
		mult   uint64
	}{{"G", 1 << 30}, {"M", 1 << 20}, {"K", 1 << 10}} {
		if n != 0 && n%u.mult == 0 {
			return strconv.FormatUint(n/u.mult, 10) + u.suffix
		}
	}
	return strconv.FormatUint(n, 10)
}

func (b byteSize) Type() string { return "bytes" }

func (b byteSize) Set(s string) error {
	n, err := parseBytes(s)
	if err != nil {
		return err
	}
	if b.max != 0 && n > b.max {
		return fmt.Errorf("%q: at most %d bytes", s, b.max)
	}
	*b.n, *b.set = n, true
	return nil
}
