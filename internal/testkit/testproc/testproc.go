// Package testproc runs a Verdict service as a real process in a test,
// where a kill or a restart matters: the binary built with go build, or
// the test binary re-executed as the service; its output in a log file;
// ready once a log line says so; killed with SIGKILL or stopped with
// SIGTERM and its exit checked. For tests only.
package testproc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Spec describes one process.
type Spec struct {
	// Name names the process in its log file and in errors.
	Name string
	// Path is the binary; Args its arguments.
	Path string
	Args []string
	// Env is the whole environment (nil: the test's).
	Env []string
	// LogDir holds the log, <Name>.log (required).
	LogDir string
	// Ready is part of the log line that says the process is ready ("":
	// ready once started).
	Ready string
	// Also receives a copy of the output (optional).
	Also io.Writer
}

// Proc is a running (or exited) process.
type Proc struct {
	Spec    Spec
	LogPath string
	Started time.Time

	cmd    *exec.Cmd
	ready  chan struct{}
	exited chan struct{}
}

// Start starts the process.
func Start(s Spec) (*Proc, error) {
	if s.Name == "" || s.Path == "" || s.LogDir == "" {
		return nil, errors.New("testproc: a spec needs a name, a path and a log folder")
	}
	p := &Proc{Spec: s, LogPath: filepath.Join(s.LogDir, s.Name+".log"), ready: make(chan struct{}), exited: make(chan struct{})}
	file, err := os.Create(p.LogPath)
	if err != nil {
		return nil, err
	}
	var out io.Writer = file
	if s.Also != nil {
		out = io.MultiWriter(file, s.Also)
	}
	if s.Ready == "" {
		close(p.ready)
	} else {
		out = &lineWatch{w: out, match: []byte(s.Ready), hit: p.ready}
	}
	p.cmd = exec.Command(s.Path, s.Args...)
	p.cmd.Env = s.Env
	p.cmd.Stdout, p.cmd.Stderr = out, out
	if err := p.cmd.Start(); err != nil {
		_ = file.Close()
		return nil, fmt.Errorf("start %s: %w", s.Name, err)
	}
	p.Started = time.Now()
	go func() {
		_ = p.cmd.Wait() // the outcome is in State
		_ = file.Close()
		close(p.exited)
	}()
	return p, nil
}

// StartForTest starts the process and ends it when the test ends: with
// SIGTERM when stop is set (it must exit 0 within 30 s), with SIGKILL
// otherwise. The end of its log is shown when the test fails.
func StartForTest(t testing.TB, s Spec, stop bool) *Proc {
	t.Helper()
	p, err := Start(s)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if stop {
			if err := p.Stop(30 * time.Second); err != nil {
				t.Error(err)
			}
		} else if _, err := p.Kill(); err != nil {
			t.Error(err)
		}
		if t.Failed() {
			t.Logf("%s (last 40 lines):\n%s", s.Name, p.Tail(40))
		}
	})
	return p
}

// Pid is the process id.
func (p *Proc) Pid() int { return p.cmd.Process.Pid }

// Ready is closed once the log says the process is ready.
func (p *Proc) Ready() <-chan struct{} { return p.ready }

// IsReady reports whether the process said it is ready.
func (p *Proc) IsReady() bool { return closed(p.ready) }

// Exited is closed once the process has exited and been reaped.
func (p *Proc) Exited() <-chan struct{} { return p.exited }

// Gone reports whether the process has exited.
func (p *Proc) Gone() bool { return closed(p.exited) }

// State is how the process ended (nil while it runs).
func (p *Proc) State() *os.ProcessState {
	if !p.Gone() {
		return nil
	}
	return p.cmd.ProcessState
}

// Kill sends SIGKILL and waits until the process is reaped; it reports
// whether SIGKILL is what ended it (false if it had exited before).
func (p *Proc) Kill() (bool, error) {
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return false, fmt.Errorf("kill %s (pid %d): %w", p.Spec.Name, p.Pid(), err)
	}
	select {
	case <-p.exited:
	case <-time.After(10 * time.Second):
		return false, fmt.Errorf("%s (pid %d) not reaped 10s after SIGKILL", p.Spec.Name, p.Pid())
	}
	ws, ok := p.cmd.ProcessState.Sys().(syscall.WaitStatus)
	return ok && ws.Signaled() && ws.Signal() == syscall.SIGKILL, nil
}

// Stop sends SIGTERM and waits up to timeout for the process to exit: an
// exit other than 0, or no exit in time (then it is killed), is an error.
func (p *Proc) Stop(timeout time.Duration) error {
	if err := p.cmd.Process.Signal(syscall.SIGTERM); err != nil && !errors.Is(err, os.ErrProcessDone) {
		return fmt.Errorf("stop %s: %w", p.Spec.Name, err)
	}
	select {
	case <-p.exited:
	case <-time.After(timeout):
		_, _ = p.Kill()
		return fmt.Errorf("%s did not stop within %s of SIGTERM", p.Spec.Name, timeout)
	}
	if !p.cmd.ProcessState.Success() {
		return fmt.Errorf("%s after SIGTERM: %s", p.Spec.Name, p.cmd.ProcessState)
	}
	return nil
}

// Tail is the last n lines of the log.
func (p *Proc) Tail(n int) string {
	b, err := os.ReadFile(p.LogPath)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

// Build builds the main package pkg (an import path) into dir and
// returns the binary's path (a few seconds with the build cache warm).
func Build(ctx context.Context, pkg, dir string) (string, error) {
	bin := filepath.Join(dir, filepath.Base(pkg))
	out, err := exec.CommandContext(ctx, "go", "build", "-o", bin, pkg).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("go build %s: %w: %s", pkg, err, out)
	}
	return bin, nil
}

// lineWatch copies output and closes hit at the first line holding match.
type lineWatch struct {
	w     io.Writer
	match []byte
	hit   chan struct{}

	mu   sync.Mutex
	line []byte // the start of a line split between writes
}

func (l *lineWatch) Write(p []byte) (int, error) {
	l.mu.Lock()
	if !closed(l.hit) {
		l.line = append(l.line, p...)
		if bytes.Contains(l.line, l.match) {
			close(l.hit)
			l.line = nil
		} else if i := bytes.LastIndexByte(l.line, '\n'); i >= 0 {
			l.line = append(l.line[:0], l.line[i+1:]...)
		}
	}
	l.mu.Unlock()
	return l.w.Write(p)
}

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}
