package symbolize

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"time"
)

func hangWatch(in []byte) func() bool {
	t := time.AfterFunc(200*time.Millisecond, func() {
		name := fmt.Sprintf("/tmp/hang-%d", time.Now().UnixNano())
		os.WriteFile(name, in, 0o644)
		buf := make([]byte, 1<<20)
		n := runtime.Stack(buf, true)
		os.WriteFile(name+".stack", buf[:n], 0o644)
	})
	return t.Stop
}

func bytesReader(b []byte) *bytes.Reader { return bytes.NewReader(b) }
