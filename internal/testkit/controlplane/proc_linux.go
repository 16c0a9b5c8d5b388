package controlplane

import (
	"runtime"
	"sync"
	"syscall"
)

// sysProcAttr puts a child in its own process group (Stop signals the group;
// a terminal's Ctrl-C reaches only the test binary) and has the kernel kill
// it when its parent dies: the test binary's exit, crash or kill leaves no
// etcd or apiserver running.
func sysProcAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}

// The parent-death signal fires when the OS thread that forked the child
// ends, not the process. Go ends a thread when a goroutine locked to it
// exits, which any library may do; so children are forked from one goroutine
// locked, for the life of the process, to a thread nothing else runs on.
var (
	spawnOnce sync.Once
	spawnCh   chan func()
)

func onSpawnThread(f func()) {
	spawnOnce.Do(func() {
		spawnCh = make(chan func())
		go func() {
			runtime.LockOSThread() // never unlocked: the thread lives as long as the process
			for f := range spawnCh {
				f()
			}
		}()
	})
	done := make(chan struct{})
	spawnCh <- func() { defer close(done); f() }
	<-done
}
