package controlplane

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// envHelper makes the test binary, re-run by TestNoOrphans, act as a test
// that starts a control plane and then dies.
const envHelper = "VERDICT_CONTROLPLANE_TEST_HELPER"

// TestHelperProcess is not a test on its own: TestNoOrphans runs it in a
// child test binary. It starts a control plane, prints the components'
// PIDs, then panics ("panic": StartForTest's cleanup must stop everything)
// or blocks until it is killed ("kill": the kernel must end the children).
func TestHelperProcess(t *testing.T) {
	mode := os.Getenv(envHelper)
	if mode == "" {
		t.Skip("helper for TestNoOrphans")
	}
	var cp *ControlPlane
	switch mode {
	case "panic":
		cp = StartForTest(t, WithoutCRDs(), WithRootDir(os.Getenv("TMPDIR")))
	case "kill":
		var err error
		if cp, err = Start(t.Context(), WithoutCRDs(), WithRootDir(os.Getenv("TMPDIR"))); err != nil {
			t.Fatal(err)
		}
	}
	var pids []string
	for _, p := range cp.processes() {
		pids = append(pids, strconv.Itoa(p.pid()))
	}
	fmt.Printf("PIDS %s\n", strings.Join(pids, " "))
	if mode == "panic" {
		panic("helper: panic with a running control plane")
	}
	select {}
}

func TestNoOrphans(t *testing.T) {
	if testing.Short() {
		t.Skip("needs the control-plane binaries; skipped under -short")
	}
	bin, err := EnsureBinaries(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, mode := range []string{"panic", "kill"} {
		t.Run(mode, func(t *testing.T) {
			root := t.TempDir()
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperProcess$", "-test.v")
			cmd.Env = append(os.Environ(), envHelper+"="+mode, envBin+"="+bin, "TMPDIR="+root)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			stdout, w, err := os.Pipe()
			if err != nil {
				t.Fatal(err)
			}
			defer func() { _ = stdout.Close() }()
			cmd.Stdout = w
			err = cmd.Start()
			_ = w.Close() // the helper has its copy
			if err != nil {
				t.Fatal(err)
			}
			var pids []int
			var out bytes.Buffer
			scan := bufio.NewScanner(stdout)
			for scan.Scan() {
				out.WriteString(scan.Text() + "\n")
				if rest, ok := strings.CutPrefix(scan.Text(), "PIDS "); ok {
					for _, f := range strings.Fields(rest) {
						pid, _ := strconv.Atoi(f)
						pids = append(pids, pid)
					}
					break
				}
			}
			if len(pids) != 2 {
				_ = cmd.Process.Kill()
				_ = cmd.Wait()
				t.Fatalf("helper printed no PIDs:\n%s\n%s", out.String(), stderr.String())
			}
			if mode == "kill" {
				if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
					t.Fatal(err)
				}
			}
			go func() { _, _ = io.Copy(io.Discard, stdout) }() // the rest of the helper's output
			werr := cmd.Wait()
			t.Logf("helper exited: %v", werr)
			var exitErr *exec.ExitError
			if !errors.As(werr, &exitErr) {
				t.Errorf("helper ended with %v, want a failure exit", werr)
			}
			for _, pid := range pids {
				deadline := time.Now().Add(10 * time.Second)
				for alive(pid) {
					if time.Now().After(deadline) {
						t.Errorf("pid %d still running after the helper died (%s)", pid, mode)
						_ = syscall.Kill(pid, syscall.SIGKILL)
						break
					}
					time.Sleep(50 * time.Millisecond)
				}
			}
			if mode == "panic" { // Stop ran: it removed the temporary directory
				if entries, _ := os.ReadDir(root); len(entries) != 0 {
					t.Errorf("after a panic, %s holds %v; want StartForTest's cleanup to remove it", root, entries)
				}
			}
		})
	}
}

// alive reports whether pid runs; a zombie (ended, waiting for a reaper
// that may never come inside a container) does not.
func alive(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return false
	}
	// pid (comm) state ...; comm may hold spaces and parentheses.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return false
	}
	return s[i+2] != 'Z'
}
