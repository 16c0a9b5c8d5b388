package controlplane

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/verdict-dev/verdict/internal/testkit"
)

// logTailLines is how many lines of a component's log an error carries.
const logTailLines = 30

// process is one child: etcd, kube-apiserver or kube-controller-manager. It
// runs in its own process group; its output goes to a log file.
type process struct {
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{} // closed when the process has been reaped
	waitErr error         // valid after done
}

func startProcess(name, bin, logPath string, args []string) (*process, error) {
	logFile, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, fmt.Errorf("%s log: %w", name, err)
	}
	fmt.Fprintf(logFile, "+ %s %s\n", bin, strings.Join(args, " "))
	cmd := exec.Command(bin, args...)
	cmd.Stdout = logFile
	cmd.Stderr = logFile
	cmd.Env = os.Environ()
	cmd.SysProcAttr = sysProcAttr()
	onSpawnThread(func() { err = cmd.Start() })
	if err != nil {
		_ = logFile.Close()
		return nil, fmt.Errorf("start %s: %w", name, err)
	}
	p := &process{name: name, cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		p.waitErr = cmd.Wait()
		_ = logFile.Close()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has ended, and how.
func (p *process) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.waitErr
	default:
		return false, nil
	}
}

func (p *process) pid() int { return p.cmd.Process.Pid }

// stop sends SIGTERM to the process group, waits up to timeout, then sends
// SIGKILL and waits for the process to be reaped.
func (p *process) stop(timeout time.Duration) error {
	if done, _ := p.exited(); done {
		return nil
	}
	pgid := p.pid()
	if err := syscall.Kill(-pgid, syscall.SIGTERM); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("stop %s: %w", p.name, err)
	}
	select {
	case <-p.done:
		return nil
	case <-time.After(timeout):
	}
	if err := syscall.Kill(-pgid, syscall.SIGKILL); err != nil && !errors.Is(err, syscall.ESRCH) {
		return fmt.Errorf("kill %s: %w", p.name, err)
	}
	select {
	case <-p.done:
		return fmt.Errorf("%s did not stop within %v of SIGTERM and was killed", p.name, timeout)
	case <-time.After(10 * time.Second):
		return fmt.Errorf("%s (pid %d) survived SIGKILL", p.name, pgid)
	}
}

// tail returns the last n lines of the log.
func (p *process) tail(n int) string {
	b, err := os.ReadFile(p.logPath)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", p.logPath, err)
	}
	return lastLines(b, n)
}

func lastLines(b []byte, n int) string {
	b = bytes.TrimRight(b, "\n")
	i := len(b)
	for ; n > 0 && i > 0; n-- {
		i = bytes.LastIndexByte(b[:i], '\n')
		if i < 0 {
			i = 0
			break
		}
	}
	return string(bytes.TrimLeft(b[i:], "\n"))
}

// withLog decorates a start-up error with the component's state and the
// end of its log.
func (p *process) withLog(err error) error {
	state := "running"
	if done, werr := p.exited(); done {
		state = "exited"
		if werr != nil {
			state = "exited: " + werr.Error()
		}
	}
	return fmt.Errorf("%w [%s pid %d, %s]\n--- last lines of %s (VERDICT_CONTROLPLANE_KEEP=1 keeps it) ---\n%s\n---",
		err, p.name, p.pid(), state, p.logPath, p.tail(logTailLines))
}

// portInUse reports whether a failed component complained about its port.
func (p *process) portInUse() bool {
	return strings.Contains(p.tail(logTailLines), "address already in use")
}

// Ports handed out by this process are not handed out again, so that two
// control planes started together by one test binary never collide; other
// processes can still race for a port between its probe and its use, which
// Start answers by trying again.
var (
	portsMu sync.Mutex
	ports   = map[int]bool{}
)

// FreePort returns a loopback port nothing listened on a moment ago and
// that this process has not handed out before (the control plane's
// processes and whoever else asks in this process, the demo's webhook).
func FreePort() (int, error) {
	portsMu.Lock()
	defer portsMu.Unlock()
	for range 100 {
		// Below the ephemeral range: see testkit.FreeLoopback.
		addr, err := testkit.FreeLoopback()
		if err != nil {
			return 0, fmt.Errorf("controlplane: free port: %w", err)
		}
		_, p, _ := net.SplitHostPort(addr)
		port, err := strconv.Atoi(p)
		if err != nil {
			return 0, fmt.Errorf("controlplane: free port: %w", err)
		}
		if !ports[port] {
			ports[port] = true
			return port, nil
		}
	}
	return 0, errors.New("controlplane: free port: none left on 127.0.0.1")
}

func hostPort(port int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(port)) }
