package testproc

import (
	"strings"
	"testing"
	"time"
)

func shell(t *testing.T, name, script, ready string) *Proc {
	t.Helper()
	p, err := Start(Spec{Name: name, Path: "/bin/sh", Args: []string{"-c", script}, LogDir: t.TempDir(), Ready: ready})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func TestReadyAndKill(t *testing.T) {
	p := shell(t, "sleeper", "echo starting; sleep 0.2; echo 'all ready now'; exec sleep 30", "ready now")
	select {
	case <-p.Ready():
	case <-time.After(10 * time.Second):
		t.Fatal("not ready")
	}
	killed, err := p.Kill()
	if err != nil || !killed {
		t.Fatalf("Kill = %v, %v", killed, err)
	}
	if !p.Gone() || p.State() == nil {
		t.Fatal("not gone after Kill")
	}
	if tail := p.Tail(5); !strings.Contains(tail, "all ready now") {
		t.Fatalf("log %q", tail)
	}
}

func TestStop(t *testing.T) {
	clean := shell(t, "clean", "trap 'exit 0' TERM; echo up; while :; do sleep 0.05; done", "up")
	<-clean.Ready()
	if err := clean.Stop(10 * time.Second); err != nil {
		t.Fatalf("a clean exit on SIGTERM: %v", err)
	}
	failing := shell(t, "failing", "trap 'exit 3' TERM; echo up; while :; do sleep 0.05; done", "up")
	<-failing.Ready()
	if err := failing.Stop(10 * time.Second); err == nil || !strings.Contains(err.Error(), "exit status 3") {
		t.Fatalf("exit 3 on SIGTERM: %v", err)
	}
	deaf := shell(t, "deaf", "trap '' TERM; echo up; while :; do sleep 0.05; done", "up")
	<-deaf.Ready()
	if err := deaf.Stop(300 * time.Millisecond); err == nil || !strings.Contains(err.Error(), "did not stop") {
		t.Fatalf("no exit on SIGTERM: %v", err)
	}
	if !deaf.Gone() {
		t.Fatal("a process that ignores SIGTERM is left running after Stop")
	}
}
