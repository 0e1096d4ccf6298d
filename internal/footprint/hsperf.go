package footprint

import (
	"encoding/binary"
	"errors"
	"strings"
)

// The JVM's performance counters (hsperfdata): HotSpot keeps them in a
// file it maps shared, /tmp/hsperfdata_USER/PID, and updates them as it
// runs (jstat reads the same file). memtrace reads them from the mapping
// in the process's memory: no attach, no thread started in the JVM, and
// no file another user may have planted. The layout is HotSpot's
// PerfDataPrologue (32 bytes) then entries (PerfDataEntry, 20 bytes of
// header each, then the name and the data).
const (
	perfMagic      = 0xcafec0c0 // always big-endian
	perfPrologue   = 32
	perfEntryHead  = 20
	perfTypeLong   = 'J'
	perfTypeByte   = 'B'
	maxPerfData    = 1 << 20 // the JVM's default is 32 KiB (PerfDataMemorySize)
	maxPerfEntries = 1 << 14
)

var errPerfData = errors.New("not JVM performance data")

// perfCounters is what memtrace reads of a JVM's counters: its long
// scalars and its strings (byte vectors up to their first NUL).
type perfCounters struct {
	longs   map[string]int64
	strings map[string]string
}

// parsePerfData parses hsperfdata b. It is untrusted: every offset is
// checked against b, and a bad entry ends the parse with what came before.
func parsePerfData(b []byte) (perfCounters, error) {
	c := perfCounters{longs: map[string]int64{}, strings: map[string]string{}}
	if len(b) < perfPrologue || binary.BigEndian.Uint32(b) != perfMagic {
		return c, errPerfData
	}
	var bo binary.ByteOrder = binary.BigEndian
	if b[4] == 1 {
		bo = binary.LittleEndian
	}
	off, n := int64(int32(bo.Uint32(b[24:]))), int64(int32(bo.Uint32(b[28:])))
	if n > maxPerfEntries {
		n = maxPerfEntries
	}
	for i := int64(0); i < n; i++ {
		if off < perfPrologue || off+perfEntryHead > int64(len(b)) {
			break
		}
		e := b[off:]
		length := int64(int32(bo.Uint32(e)))
		nameOff, vecLen := int64(int32(bo.Uint32(e[4:]))), int64(int32(bo.Uint32(e[8:])))
		typ, dataOff := e[12], int64(int32(bo.Uint32(e[16:])))
		if length < perfEntryHead || off+length > int64(len(b)) || nameOff < perfEntryHead ||
			nameOff >= length || dataOff < nameOff || dataOff > length {
			break
		}
		ent := e[:length]
		name := ent[nameOff:dataOff]
		if z := indexNUL(name); z >= 0 {
			name = name[:z]
		}
		data := ent[dataOff:]
		switch {
		case typ == perfTypeLong && vecLen == 0 && len(data) >= 8:
			c.longs[string(name)] = int64(bo.Uint64(data))
		case typ == perfTypeByte && vecLen > 0 && vecLen <= int64(len(data)):
			s := data[:vecLen]
			if z := indexNUL(s); z >= 0 {
				s = s[:z]
			}
			c.strings[string(name)] = string(s)
		}
		off += length
	}
	return c, nil
}

func indexNUL(b []byte) int {
	for i, c := range b {
		if c == 0 {
			return i
		}
	}
	return -1
}

// findPerfData reads the counters of a JVM from the mapping of its
// hsperfdata file; ok is false when the process maps none (no JVM, or one
// started with -XX:-UsePerfData or -XX:+PerfDisableSharedMem).
func findPerfData(vmas []vma, mem memory) (perfCounters, bool) {
	for i := range vmas {
		v := &vmas[i]
		if !strings.Contains(v.path, "/hsperfdata_") || v.perms[0] != 'r' {
			continue
		}
		b := make([]byte, min(v.end-v.start, maxPerfData))
		if err := mem.read(b, v.start); err != nil {
			continue
		}
		if c, err := parsePerfData(b); err == nil {
			return c, true
		}
	}
	return perfCounters{}, false
}
