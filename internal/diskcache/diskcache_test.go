package diskcache

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"
)

func open(t *testing.T, dir string, max int64) *Store {
	t.Helper()
	s, err := Open(dir, max, 1)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func entries(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range ents {
		names = append(names, e.Name())
	}
	return names
}

// TestHitMiss: a stored payload comes back whole, from this store and from
// another on the same directory (a second memtrace); other keys miss.
func TestHitMiss(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "cache")
	s := open(t, dir, 1<<20)
	if _, err := s.Get("a"); !errors.Is(err, ErrMiss) {
		t.Fatalf("empty store: err %v, want ErrMiss", err)
	}
	want := []byte("payload")
	if err := s.Put("a", want); err != nil {
		t.Fatal(err)
	}
	for _, st := range []*Store{s, open(t, dir, 1<<20)} {
		if got, err := st.Get("a"); err != nil || !bytes.Equal(got, want) {
			t.Errorf("Get(a) = %q, %v; want %q", got, err, want)
		}
		if _, err := st.Get("b"); !errors.Is(err, ErrMiss) {
			t.Errorf("Get(b): err %v, want ErrMiss", err)
		}
	}
	// Another format version does not read this one's entries.
	other, err := Open(dir, 1<<20, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := other.Get("a"); !errors.Is(err, ErrDamaged) {
		t.Errorf("version 2 reading version 1: err %v, want ErrDamaged", err)
	}
	st, err := os.Stat(dir)
	if err != nil || st.Mode().Perm() != 0o700 {
		t.Errorf("directory mode %v (%v), want 0700", st.Mode().Perm(), err)
	}
}

// TestDamaged: every kind of damage reads as ErrDamaged and removes the
// entry, so that it is rebuilt.
func TestDamaged(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 1<<20)
	payload := bytes.Repeat([]byte("row!"), 100)
	for _, tt := range []struct {
		name   string
		damage func([]byte) []byte
	}{
		{"truncated", func(b []byte) []byte { return b[:len(b)/2] }},
		{"empty", func([]byte) []byte { return nil }},
		{"bit flipped", func(b []byte) []byte { b[len(b)/2] ^= 1; return b }},
		{"checksum", func(b []byte) []byte { b[len(b)-1] ^= 1; return b }},
		{"other magic", func(b []byte) []byte { copy(b, "MTUNWIND"); return b }},
		{"grown", func(b []byte) []byte { return append(b, 0) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if err := s.Put("k", payload); err != nil {
				t.Fatal(err)
			}
			name := filepath.Join(dir, "k")
			b, err := os.ReadFile(name)
			if err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(name, tt.damage(b), 0o600); err != nil {
				t.Fatal(err)
			}
			if got, err := s.Get("k"); !errors.Is(err, ErrDamaged) {
				t.Fatalf("Get = %d bytes, %v; want ErrDamaged", len(got), err)
			}
			if _, err := os.Stat(name); !os.IsNotExist(err) {
				t.Errorf("damaged entry kept: %v", err)
			}
		})
	}
}

// TestEviction: past the bound, the least recently used entries go, down
// to 7/8 of it; a Get makes an entry recently used.
func TestEviction(t *testing.T) {
	dir := t.TempDir()
	payload := make([]byte, 1000)
	entry := int64(headerLen + len(payload) + trailLen)
	s := open(t, dir, 3*entry)
	past := time.Now().Add(-time.Hour)
	for i, k := range []string{"a", "b", "c"} {
		if err := s.Put(k, payload); err != nil {
			t.Fatal(err)
		}
		// Use times one second apart: a, then b, then c.
		at := past.Add(time.Duration(i) * time.Second)
		if err := os.Chtimes(filepath.Join(dir, k), at, at); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := s.Get("a"); err != nil { // a is now the most recent
		t.Fatal(err)
	}
	if err := s.Put("d", payload); err != nil {
		t.Fatal(err)
	}
	// Down to 7/8 of the bound: b and c, the least recently used, go.
	want := []string{"a", "d"}
	if got := entries(t, dir); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("entries %v, want %v (b and c least recently used)", got, want)
	}
	if err := s.Put("big", make([]byte, 4*entry)); err == nil {
		t.Error("an entry over the whole bound was stored")
	}
}

// TestConcurrentWriters: two stores (two memtraces) writing one key at
// once leave one whole entry and no temporary files.
func TestConcurrentWriters(t *testing.T) {
	dir := t.TempDir()
	a, b := open(t, dir, 1<<26), open(t, dir, 1<<26)
	pa, pb := bytes.Repeat([]byte{1}, 1<<20), bytes.Repeat([]byte{2}, 1<<20)
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			if err := a.Put("k", pa); err != nil {
				t.Error(err)
			}
		}()
		go func() {
			defer wg.Done()
			if i%2 == 0 {
				if err := b.Put("k", pb); err != nil {
					t.Error(err)
				}
				return
			}
			// Readers see an old or a new entry, whole.
			if got, err := b.Get("k"); err == nil && !bytes.Equal(got, pa) && !bytes.Equal(got, pb) {
				t.Error("read a mixed entry")
			} else if err != nil && !errors.Is(err, ErrMiss) {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	got, err := a.Get("k")
	if err != nil || (!bytes.Equal(got, pa) && !bytes.Equal(got, pb)) {
		t.Errorf("after the writers: %d bytes, %v", len(got), err)
	}
	if names := entries(t, dir); len(names) != 1 {
		t.Errorf("entries %v, want k alone", names)
	}
}

// TestUnsafe: keys that are no plain names are refused; a symlink planted
// at an entry is not followed; a directory of another kind is refused.
func TestUnsafe(t *testing.T) {
	dir := t.TempDir()
	s := open(t, dir, 1<<20)
	for _, k := range []string{"", ".", "..", "../x", "a/b", ".hidden", "-x", "a\x00b", "é"} {
		if err := s.Put(k, []byte("x")); err == nil {
			t.Errorf("Put(%q): stored", k)
		}
		if _, err := s.Get(k); err == nil {
			t.Errorf("Get(%q): found", k)
		}
	}
	victim := filepath.Join(t.TempDir(), "victim")
	if err := os.WriteFile(victim, []byte("untouched"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(victim, filepath.Join(dir, "link")); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Get("link"); err == nil {
		t.Error("Get through a symlink: found")
	}
	if err := s.Put("link", []byte("new")); err != nil {
		t.Fatal(err)
	}
	if b, _ := os.ReadFile(victim); string(b) != "untouched" {
		t.Errorf("Put wrote through a symlink: victim now %q", b)
	}
	if got, err := s.Get("link"); err != nil || string(got) != "new" {
		t.Errorf("Get(link) after Put = %q, %v", got, err)
	}

	open := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(open, 0o777); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(open, 1<<20, 1); !errors.Is(err, ErrUnsafeDir) {
		t.Errorf("world-writable directory: err %v, want ErrUnsafeDir", err)
	}
	link := filepath.Join(t.TempDir(), "dirlink")
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(link, 1<<20, 1); !errors.Is(err, ErrUnsafeDir) {
		t.Errorf("symlinked directory: err %v, want ErrUnsafeDir", err)
	}
}

// TestListingsAmortized: a store lists its directory at its first write,
// then only when its writes take it past the bound; another store's
// entries count from its next listing, and the bound then holds for both.
func TestListingsAmortized(t *testing.T) {
	dir := t.TempDir()
	payload := make([]byte, 1000)
	entry := int64(headerLen + len(payload) + trailLen)
	a, b := open(t, dir, 6*entry), open(t, dir, 6*entry)
	steps := []struct {
		store        *Store
		key          string
		wantListings int
		wantEntries  int
	}{
		{a, "a1", 1, 1}, // the first write lists
		{a, "a2", 1, 2},
		{a, "a3", 1, 3},
		{b, "b1", 1, 4}, // b's first write lists, and sees a's
		{b, "b2", 1, 5},
		{a, "a4", 1, 6}, // a counts 4 of its own: no listing
		{a, "a5", 1, 7}, // 5 by a's count: still none, 7 in the directory
		{a, "a6", 1, 8},
		{a, "a7", 2, 5}, // 7 by a's count, past 6: a lists, down to 7/8 of 6
		{b, "b3", 1, 6}, // 6 by b's count
		{b, "b4", 2, 5}, // 7: b lists, and sees a's eviction
		{b, "b5", 2, 6},
		{b, "b6", 3, 5},
		{b, "b7", 3, 6},
	}
	for i, st := range steps {
		if err := st.store.Put(st.key, payload); err != nil {
			t.Fatal(err)
		}
		if st.store.listings != st.wantListings {
			t.Errorf("step %d (%s): %d listings, want %d", i, st.key, st.store.listings, st.wantListings)
		}
		if got := len(entries(t, dir)); got != st.wantEntries {
			t.Errorf("step %d (%s): %d entries, want %d", i, st.key, got, st.wantEntries)
		}
	}
}
