package footprint

import (
	"encoding/binary"
	"reflect"
	"testing"
)

// perfData builds an hsperfdata buffer as HotSpot lays it out
// (little-endian), with longs and strings.
func perfData(longs map[string]int64, strs map[string]string) []byte {
	b := make([]byte, perfPrologue)
	binary.BigEndian.PutUint32(b, perfMagic)
	b[4] = 1
	n := 0
	entry := func(name string, typ byte, vec int, data []byte) {
		nameOff := perfEntryHead
		dataOff := nameOff + len(name) + 1
		for dataOff%8 != 0 {
			dataOff++
		}
		e := make([]byte, dataOff+len(data))
		binary.LittleEndian.PutUint32(e, uint32(len(e)))
		binary.LittleEndian.PutUint32(e[4:], uint32(nameOff))
		binary.LittleEndian.PutUint32(e[8:], uint32(vec))
		e[12] = typ
		binary.LittleEndian.PutUint32(e[16:], uint32(dataOff))
		copy(e[nameOff:], name)
		copy(e[dataOff:], data)
		b = append(b, e...)
		n++
	}
	for k, v := range longs {
		entry(k, perfTypeLong, 0, binary.LittleEndian.AppendUint64(nil, uint64(v)))
	}
	for k, v := range strs {
		entry(k, perfTypeByte, len(v)+1, append([]byte(v), 0))
	}
	binary.LittleEndian.PutUint32(b[24:], perfPrologue)
	binary.LittleEndian.PutUint32(b[28:], uint32(n))
	return b
}

// TestParsePerfData: the counters read back; a buffer that is not
// hsperfdata, or whose entries point outside it, gives what is sound.
func TestParsePerfData(t *testing.T) {
	b := perfData(map[string]int64{"sun.gc.metaspace.capacity": 327680}, map[string]string{"sun.gc.generation.0.name": "young"})
	c, err := parsePerfData(b)
	if err != nil || c.longs["sun.gc.metaspace.capacity"] != 327680 || c.strings["sun.gc.generation.0.name"] != "young" {
		t.Errorf("parse: %+v, %v", c, err)
	}
	if _, err := parsePerfData(make([]byte, 64)); err != errPerfData {
		t.Errorf("zeros: %v, want errPerfData", err)
	}
	bad := append([]byte(nil), b...)
	binary.LittleEndian.PutUint32(bad[perfPrologue:], 1<<30) // entry length past the end
	if c, err := parsePerfData(bad); err != nil || len(c.longs)+len(c.strings) > 1 {
		t.Errorf("bad entry: %+v, %v", c, err)
	}
}

// TestJVMHeaps: a G1 JVM of -Xmx256m as measured here: the heap's and the
// class space's reservations found among their neighbours by the
// counters' sizes (CDS regions at the heap's top), Metaspace's node and
// the code cache by their mappings.
func TestJVMHeaps(t *testing.T) {
	const mib = 1 << 20
	c := perfCounters{
		longs: map[string]int64{
			"sun.gc.generation.0.maxCapacity": 256*mib + 24, "sun.gc.generation.0.capacity": 14*mib + 24,
			"sun.gc.generation.1.maxCapacity": 256*mib + 8, "sun.gc.generation.1.capacity": 242*mib + 8,
			"sun.gc.metaspace.maxCapacity": 1088 * mib, "sun.gc.metaspace.capacity": 320 << 10,
			"sun.gc.compressedclassspace.maxCapacity": 1024 * mib, "sun.gc.compressedclassspace.capacity": 128 << 10,
		},
		strings: map[string]string{"sun.gc.generation.0.name": "young"},
	}
	vmas := []vma{
		{start: 0xd0000000, end: 0xe0000000, perms: "rw-p", rss: 1 * mib}, // an idle reservation of the heap's size
		{start: 0xf0000000, end: 0xffe00000, perms: "rw-p", rss: 100 * mib},
		{start: 0xffe00000, end: 0xfff00000, perms: "rw-p", inode: 5, path: "/usr/lib/jvm/lib/server/classes.jsa", rss: mib},
		{start: 0xfff00000, end: 0x100000000, perms: "rw-p", rss: mib / 2},
		{start: 0x7f0000000000, end: 0x7f0000020000, perms: "rw-p", rss: 64 << 10},
		{start: 0x7f0000020000, end: 0x7f0040000000, perms: "---p"},
		{start: 0x7f0040000000, end: 0x7f0040100000, perms: "rw-p", rss: mib}, // not the code cache
		{start: 0x7f0040100000, end: 0x7f0040200000, perms: "rwxp", rss: 512 << 10},
		{start: 0x7f0040200000, end: 0x7f004f100000, perms: "---p"},
		{start: 0x7f004f100000, end: 0x7f004f200000, perms: "r--p", inode: 9, path: "/usr/lib/x.so"},
		// A Metaspace node on a 4 MiB boundary, then a glibc arena of the
		// same size (its heap_info below), which is not one.
		{start: 0x7f0050400000, end: 0x7f0050430000, perms: "rw-p", rss: 128 << 10},
		{start: 0x7f0050430000, end: 0x7f0054400000, perms: "---p"},
		{start: 0x7f0058000000, end: 0x7f0058021000, perms: "rw-p", rss: 132 << 10},
		{start: 0x7f0058021000, end: 0x7f005c000000, perms: "---p"},
	}
	mem := fakeMemory{words: map[uint64]uint64{0x7f0058000000: 0x7f0058000020, 0x7f0058000010: 0x21000, 0x7f0058000018: 0x21000}}
	want := []ManagedHeap{
		{Name: "Java heap", State: State{Reserved: 256 * mib, Committed: 256 * mib, Resident: 101*mib + mib/2}, Located: true, Source: "hsperfdata"},
		{Name: "Metaspace", State: State{Reserved: 64 * mib, Committed: 192 << 10, Resident: 128 << 10}, Located: true, Source: "maps"},
		{Name: "Class space", State: State{Reserved: 1024 * mib, Committed: 128 << 10, Resident: 64 << 10}, Located: true, Source: "hsperfdata"},
		{Name: "Code cache", State: State{Reserved: 240 * mib, Committed: mib, Resident: 512 << 10}, Located: true, Source: "maps"},
	}
	if got := jvmHeaps(vmas, c, mem); !reflect.DeepEqual(got, want) {
		t.Errorf("jvmHeaps:\n got %+v\nwant %+v", got, want)
	}
}
