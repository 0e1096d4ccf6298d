package symbolize

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestZZTimeCorpus(t *testing.T) {
	dir := os.Getenv("CORPUS")
	ents, _ := os.ReadDir(dir)
	for _, e := range ents {
		in := readSeed(t, filepath.Join(dir, e.Name()))
		st := time.Now()
		m, err := NewModule(bytesReader(in))
		if err == nil {
			err = m.Load()
		}
		if d := time.Since(st); d > 20*time.Millisecond {
			t.Logf("%s: %v len=%d err=%v", e.Name(), d, len(in), err)
		}
	}
}
