package aggregate

import (
	"fmt"
	"math/rand/v2"
	"testing"
)

// TestLiveTableAgainstMap drives a liveTable and a Go map with the same
// random inserts, replacements and removals over address patterns an
// allocator produces (dense 16-byte steps, page-aligned, far apart) and
// checks they agree, through growth and shrinking.
func TestLiveTableAgainstMap(t *testing.T) {
	patterns := map[string]func(i uint64) uint64{
		"dense":  func(i uint64) uint64 { return 0x5555_5555_0000 + i*16 },
		"pages":  func(i uint64) uint64 { return 0x7f00_0000_0010 + i*4096 },
		"spread": func(i uint64) uint64 { return 1 + i<<33 },
		"random": func(i uint64) uint64 { return splitmix(i) | 1 },
	}
	for _, shardMax := range []int{0, 256} {
		for name, addrOf := range patterns {
			t.Run(fmt.Sprintf("%s/shardmax=%d", name, shardMax), func(t *testing.T) {
				testLiveTable(t, addrOf, shardMax)
			})
		}
	}
}

func testLiveTable(t *testing.T, addrOf func(uint64) uint64, shardMax int) {
	rng := rand.New(rand.NewPCG(3, 4))
	lt := liveTable{shardMax: shardMax}
	ref := map[uint64]liveBlock{}
	const keys = 50_000
	check := func(addr uint64) {
		t.Helper()
		got, ok := lt.get(addr)
		want, wok := ref[addr]
		if ok != wok || got != want {
			t.Fatalf("get(%#x) = %+v, %v; want %+v, %v", addr, got, ok, want, wok)
		}
	}
	for step := range 400_000 {
		// Grow to most keys, then churn, then drain: the table
		// grows, holds steady and shrinks.
		addr := addrOf(uint64(rng.IntN(keys)))
		removing := rng.IntN(100) < map[bool]int{true: 30, false: 98}[step < 200_000]
		if removing {
			got, ok := lt.remove(addr)
			want, wok := ref[addr]
			if ok != wok || got != want {
				t.Fatalf("step %d: remove(%#x) = %+v, %v; want %+v, %v", step, addr, got, ok, want, wok)
			}
			delete(ref, addr)
		} else {
			b := liveBlock{size: uint64(rng.IntN(1 << 20)), site: uint32(step), ms: uint32(step / 7)}
			if rng.IntN(1000) == 0 {
				b.size = 1<<32 + uint64(step) // kept in the side map
			}
			old, replaced := lt.insert(addr, b)
			want, wok := ref[addr]
			if replaced != wok || old != want {
				t.Fatalf("step %d: insert(%#x) replaced %+v, %v; want %+v, %v", step, addr, old, replaced, want, wok)
			}
			ref[addr] = b
		}
		if lt.len() != len(ref) {
			t.Fatalf("step %d: len = %d, want %d", step, lt.len(), len(ref))
		}
		if step%10_000 == 0 {
			for a := range ref {
				check(a)
			}
			check(addrOf(keys + 1))
		}
	}
	seen := 0
	lt.each(func(addr uint64, b liveBlock) bool {
		seen++
		if ref[addr] != b {
			t.Fatalf("each: %#x = %+v, want %+v", addr, b, ref[addr])
		}
		return true
	})
	if seen != len(ref) {
		t.Errorf("each saw %d blocks, want %d", seen, len(ref))
	}
	if len(lt.big) > len(ref) {
		t.Errorf("side map of big sizes holds %d entries for %d blocks: removals leak", len(lt.big), len(ref))
	}
	slots := 0
	for i := 0; i < len(lt.dir); i += 1 << (lt.depth - lt.dir[i].depth) {
		slots += len(lt.dir[i].slots)
	}
	if shardMax == 0 && slots > liveShrinkFrom && slots > 8*len(ref) {
		t.Errorf("table of %d slots for %d blocks did not shrink", slots, len(ref))
	}
	if shardMax != 0 && lt.depth < 4 {
		t.Errorf("directory depth %d: shards did not split", lt.depth)
	}
}

// splitmix is SplitMix64's output function: a fixed random-looking address
// for each i.
func splitmix(i uint64) uint64 {
	z := i*0x9e3779b97f4a7c15 + 0x9e3779b97f4a7c15
	z = (z ^ z>>30) * 0xbf58476d1ce4e5b9
	z = (z ^ z>>27) * 0x94d049bb133111eb
	return z ^ z>>31
}

// TestLiveTableCraftedKeys feeds keys whose hashes share their top 16
// bits, so every split sends every key the same way: the directory must
// stop growing at liveMaxDepth and the table must stay correct.
func TestLiveTableCraftedKeys(t *testing.T) {
	// inv is the multiplicative inverse of the hash constant mod 2^64
	// (Newton's iteration), so hashAddr(h*inv) == h.
	inv := uint64(0x9e3779b97f4a7c15)
	for range 6 {
		inv *= 2 - 0x9e3779b97f4a7c15*inv
	}
	key := func(j uint64) uint64 { return (splitmix(j)>>liveMaxDepth | 1) * inv }
	lt := liveTable{shardMax: 16}
	const n = 10_000
	for j := range uint64(n) {
		lt.insert(key(j), liveBlock{size: j})
	}
	if lt.depth != liveMaxDepth || lt.len() != n {
		t.Errorf("depth %d, %d keys; want %d, %d", lt.depth, lt.len(), liveMaxDepth, n)
	}
	for j := range uint64(n) {
		if b, ok := lt.remove(key(j)); !ok || b.size != j {
			t.Fatalf("remove(key %d) = %+v, %v", j, b, ok)
		}
	}
	if lt.len() != 0 {
		t.Errorf("%d keys left", lt.len())
	}
}
