//go:build unix && !linux

package controlplane

import "syscall"

// sysProcAttr puts a child in its own process group. Without Linux's
// parent-death signal, a crashed test binary can leave children behind;
// Stop and StartForTest's cleanup are the only guard here.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true}
}

func onSpawnThread(f func()) { f() }
