package report

import (
	"math/bits"
	"strconv"
)

// binaryUnits are the suffixes of powers of 1024; EiB is enough for any
// uint64.
var binaryUnits = [...]string{"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"}

// humanBytes formats n in binary units with one decimal ("1.5 MiB"), or as
// exact bytes below 1 KiB ("1023 B"). It rounds half up in integer
// arithmetic, so no value is misprinted by float error, and it moves to the
// next unit when rounding would print "1024.0".
func humanBytes(n uint64) string {
	if n < 1024 {
		return strconv.FormatUint(n, 10) + " B"
	}
	for i := 1; ; i++ {
		unit := uint64(1) << (10 * i)
		tenths := roundedTenths(n, unit)
		if tenths < 10240 || i == len(binaryUnits)-1 {
			return strconv.FormatUint(tenths/10, 10) + "." +
				strconv.FormatUint(tenths%10, 10) + " " + binaryUnits[i]
		}
	}
}

// roundedTenths is n*10/unit rounded half up, computed in 128 bits because
// n*10 overflows uint64 for n above 1.6 EiB.
func roundedTenths(n, unit uint64) uint64 {
	hi, lo := bits.Mul64(n, 10)
	lo, carry := bits.Add64(lo, unit/2, 0)
	hi += carry
	// hi < 16 <= unit, so the quotient fits and Div64 cannot panic.
	q, _ := bits.Div64(hi, lo, unit)
	return q
}

// byteCell is a byte figure for a table cell: human units, or with raw the
// exact integer alone so columns stay easy to feed to sort and awk.
func byteCell(n uint64, raw bool) string {
	if raw {
		return strconv.FormatUint(n, 10)
	}
	return humanBytes(n)
}

// byteText is a byte figure inside a sentence, where a bare integer would be
// ambiguous, so raw mode keeps the unit.
func byteText(n uint64, raw bool) string {
	if raw {
		return strconv.FormatUint(n, 10) + " B"
	}
	return humanBytes(n)
}

// monotonicSeconds renders a CLOCK_MONOTONIC time in ns as seconds with
// millisecond precision ("5123.457s"), truncated rather than rounded so a
// later snapshot never prints an earlier-looking time.
func monotonicSeconds(ns uint64) string {
	ms := ns / 1_000_000
	frac := strconv.FormatUint(ms%1000, 10)
	for len(frac) < 3 {
		frac = "0" + frac
	}
	return strconv.FormatUint(ms/1000, 10) + "." + frac + "s"
}

// ByteText is byteText for other packages' reports (memtrace diff).
func ByteText(n uint64, raw bool) string { return byteText(n, raw) }
