package outfile

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestCreate(t *testing.T) {
	if os.Geteuid() != 0 {
		if os.Getenv("CI") == "true" {
			t.Fatal("CI=true: the owner checks need root")
		}
		t.Skip("needs root (chown)")
	}
	shared := t.TempDir()
	os.Chmod(shared, 0o1777) // as /tmp
	private := t.TempDir()
	victim := filepath.Join(t.TempDir(), "victim")
	os.WriteFile(victim, []byte("keep"), 0o644)
	for _, dir := range []string{shared, private} {
		os.Symlink(victim, filepath.Join(dir, "link"))
		os.WriteFile(filepath.Join(dir, "theirs"), []byte("x"), 0o666)
		os.Chown(filepath.Join(dir, "theirs"), 12345, 12345)
		os.WriteFile(filepath.Join(dir, "mine"), []byte("old"), 0o644)
	}
	for _, tc := range []struct {
		dir, name string
		wantErr   error
	}{
		{shared, "new", nil},
		{shared, "mine", nil},
		{shared, "link", syscall.ELOOP},
		{shared, "theirs", ErrNotOurs},
		{private, "new", nil},
		{private, "mine", nil},
		{private, "link", nil}, // the operator's own directory: taken as given
	} {
		p := filepath.Join(tc.dir, tc.name)
		f, err := Create(p)
		if !errors.Is(err, tc.wantErr) {
			t.Errorf("Create(%s) = %v, want %v", p, err, tc.wantErr)
		}
		if err != nil {
			continue
		}
		if fi, _ := f.Stat(); fi.Size() != 0 {
			t.Errorf("Create(%s) left %d bytes", p, fi.Size())
		}
		f.Close()
		if tc.name == "link" {
			os.WriteFile(victim, []byte("keep"), 0o644)
		}
	}
	if b, _ := os.ReadFile(victim); string(b) != "keep" {
		t.Errorf("the link's target holds %q", b)
	}
	if err := Touch(filepath.Join(shared, "link")); !errors.Is(err, syscall.ELOOP) {
		t.Errorf("Touch(link in a shared directory) = %v, want ELOOP", err)
	}
	if b, _ := os.ReadFile(filepath.Join(private, "mine")); len(b) != 0 {
		t.Errorf("Create kept %q", b)
	}
}
