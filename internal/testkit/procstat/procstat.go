// Package procstat reads what Linux's /proc says about a process that a
// benchmark measures from outside (nats-server, kube-apiserver, etcd, a
// webhook replica): its CPU time and its resident memory, now and at its
// peak. Benchmarks only: it reads /proc/<pid>/stat and /proc/<pid>/status.
package procstat

import (
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// Stat is a process's counters at one moment.
type Stat struct {
	// CPU is the user and system time the process used so far.
	CPU time.Duration
	// RSS and PeakRSS are its resident set now and at its highest (VmRSS,
	// VmHWM), in bytes.
	RSS, PeakRSS int64
}

// clockTicks is USER_HZ, the unit of the times in /proc/<pid>/stat: 100
// on every Linux architecture Go supports.
const clockTicks = 100

// Read reads pid's counters.
func Read(pid int) (Stat, error) {
	var st Stat
	raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return Stat{}, err
	}
	// The command name (field 2) is in parentheses and may hold spaces:
	// the fields after it are counted from its closing one.
	end := bytes.LastIndexByte(raw, ')')
	if end < 0 {
		return Stat{}, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	fields := strings.Fields(string(raw[end+1:]))
	// utime and stime are fields 14 and 15: 11 and 12 after the name.
	if len(fields) < 13 {
		return Stat{}, fmt.Errorf("/proc/%d/stat: %d fields", pid, len(fields))
	}
	var ticks int64
	for _, f := range fields[11:13] {
		n, err := strconv.ParseInt(f, 10, 64)
		if err != nil {
			return Stat{}, fmt.Errorf("/proc/%d/stat: %w", pid, err)
		}
		ticks += n
	}
	st.CPU = time.Duration(ticks) * time.Second / clockTicks
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return Stat{}, err
	}
	for line := range strings.Lines(string(status)) {
		name, value, ok := strings.Cut(line, ":")
		if !ok || (name != "VmRSS" && name != "VmHWM") {
			continue
		}
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		if err != nil {
			return Stat{}, fmt.Errorf("/proc/%d/status %s: %w", pid, name, err)
		}
		if name == "VmRSS" {
			st.RSS = kb << 10
		} else {
			st.PeakRSS = kb << 10
		}
	}
	return st, nil
}
