// Package jvmattach sends diagnostic commands to a running HotSpot JVM
// through its attach API, as jcmd does: memtrace asks for the JVM's perf
// map (Compiler.perfmap) with --jvm-perfmap. The first attach starts the
// JVM's Attach Listener thread, which stays: that is why memtrace attaches
// only when asked.
//
// The protocol (HotSpot on Linux): the client creates .attach_pid<PID> in
// the JVM's working directory or /tmp and sends SIGQUIT; the JVM's signal
// thread sees the file, starts the listener, which creates the UNIX
// socket /tmp/.java_pid<PID>; the client connects, writes the protocol
// version "1", the command and three arguments, each NUL-terminated, and
// reads the reply: a status line ("0" for success), then the command's
// output, until the JVM closes the connection. PID is the JVM's pid in its
// own pid namespace, and the paths are in its mount namespace.
package jvmattach

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/memtrace/memtrace/internal/procfile"
)

// ErrRefused is returned when the JVM answered with a non-zero status.
var ErrRefused = errors.New("the JVM refused the command")

// maxReply bounds what is read of a reply.
const maxReply = 1 << 20

// Command runs a jcmd command (such as "Compiler.perfmap") in the JVM of
// process pid and returns its output. It waits for the JVM's attach
// listener until ctx is done.
func Command(ctx context.Context, pid int, cmd string) (string, error) {
	ids, err := procfile.ReadIDs(pid)
	if err != nil {
		return "", err
	}
	sock := "/tmp/.java_pid" + strconv.Itoa(ids.NSPID)
	if !listening(pid, sock) {
		if err := startListener(ctx, pid, ids.NSPID, sock); err != nil {
			return "", err
		}
	}
	return send(ctx, pid, sock, cmd)
}

// listening reports whether the JVM's attach socket is there: a socket
// owned by the JVM's user or root.
func listening(pid int, sock string) bool {
	st, err := os.Lstat(rootPath(pid, sock))
	return err == nil && st.Mode()&os.ModeSocket != 0
}

func rootPath(pid int, path string) string {
	return "/proc/" + strconv.Itoa(pid) + "/root" + path
}

// startListener creates the trigger file in the JVM's /tmp, sends SIGQUIT
// and waits for the socket.
func startListener(ctx context.Context, pid, nspid int, sock string) error {
	trigger := "/tmp/.attach_pid" + strconv.Itoa(nspid)
	f, err := procfile.Create(pid, trigger, 0o600)
	if err != nil && !errors.Is(err, os.ErrExist) {
		return fmt.Errorf("create the JVM's attach file: %w", err)
	}
	if f != nil {
		f.Close()
		defer os.Remove(rootPath(pid, trigger))
	}
	if err := syscall.Kill(pid, syscall.SIGQUIT); err != nil {
		return fmt.Errorf("signal the JVM: %w", err)
	}
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for !listening(pid, sock) {
		select {
		case <-ctx.Done():
			return fmt.Errorf("wait for the JVM's attach listener (%s): %w", sock, ctx.Err())
		case <-tick.C:
		}
	}
	return nil
}

// send connects, writes the request and reads the reply.
func send(ctx context.Context, pid int, sock, cmd string) (string, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "unix", rootPath(pid, sock))
	if err != nil {
		return "", fmt.Errorf("connect to the JVM: %w", err)
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		c.SetDeadline(dl)
	}
	if _, err := io.WriteString(c, Request(cmd)); err != nil {
		return "", fmt.Errorf("send to the JVM: %w", err)
	}
	b, err := io.ReadAll(io.LimitReader(c, maxReply))
	if err != nil {
		return "", fmt.Errorf("read the JVM's reply: %w", err)
	}
	return ParseReply(string(b))
}

// Request is the attach protocol's request for the jcmd command cmd.
func Request(cmd string) string {
	return "1\x00jcmd\x00" + cmd + "\x00\x00\x00"
}

// ParseReply splits a reply into its status and output: the output when
// the status is 0, else an error wrapping ErrRefused with the output.
func ParseReply(reply string) (string, error) {
	status, out, _ := strings.Cut(reply, "\n")
	code, err := strconv.Atoi(strings.TrimSpace(status))
	if err != nil {
		return "", fmt.Errorf("the JVM's reply %q: no status", firstLine(reply))
	}
	if code != 0 {
		return out, fmt.Errorf("status %d: %s: %w", code, firstLine(out), ErrRefused)
	}
	return out, nil
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	if len(l) > 200 {
		l = l[:200]
	}
	return l
}
