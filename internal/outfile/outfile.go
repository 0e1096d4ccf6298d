// Package outfile creates the files memtrace writes where the operator
// asked (reports, NDJSON, recordings, dumps, exports). memtrace runs as
// root: in a directory other users can write to, such as /tmp, one of
// them could have put a symbolic link at that name beforehand, to have
// root overwrite a file of its choice, or a file of their own that root
// would then fill. There a link is never followed and a file that is not
// root's is not written; elsewhere a path is taken as given, so that
// /dev/stdout and FIFOs keep working.
package outfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
)

// ErrNotOurs: in a shared directory, the name holds a file of another
// user.
var ErrNotOurs = errors.New("in a directory others can write to, the file exists and is another user's")

// Create creates or truncates the file at path for writing (mode 0666
// before the umask, as os.Create).
func Create(path string) (*os.File, error) {
	return open(path, true)
}

// Touch creates the file at path if it is missing and leaves it as it is
// otherwise, checking that it can be written.
func Touch(path string) error {
	f, err := open(path, false)
	if err != nil {
		return err
	}
	return f.Close()
}

func open(path string, truncate bool) (*os.File, error) {
	flags := os.O_WRONLY | os.O_CREATE | syscall.O_CLOEXEC
	shared := Shared(filepath.Dir(path))
	if shared {
		flags |= syscall.O_NOFOLLOW
	} else if truncate {
		flags |= os.O_TRUNC
	}
	f, err := os.OpenFile(path, flags, 0o666)
	if err != nil {
		if shared && errors.Is(err, syscall.ELOOP) {
			return nil, fmt.Errorf("create %s: a symbolic link in a directory others can write to: %w", path, err)
		}
		return nil, err
	}
	if !shared {
		return f, nil
	}
	fi, err := f.Stat()
	if err != nil {
		f.Close()
		return nil, err
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); !ok || int(st.Uid) != os.Geteuid() {
		f.Close()
		return nil, fmt.Errorf("create %s: %w", path, ErrNotOurs)
	}
	if truncate && fi.Mode().IsRegular() {
		if err := f.Truncate(0); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, nil
}

// Shared reports whether users other than the directory's owner can
// create names in dir: it is writable by its group or by all.
func Shared(dir string) bool {
	fi, err := os.Stat(dir)
	if err != nil {
		return false // the open fails and says why
	}
	return fi.Mode().Perm()&0o022 != 0
}
