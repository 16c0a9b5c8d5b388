package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The pipeline CLI stays lean: it links no NATS server, no control-plane
// harness, no Kubernetes client (informers, REST clients) and no
// prometheus client (with its protobuf runtime: pkg/queue records metrics
// through its own interfaces, pkg/queue/queueprom is the services'). Those
// belong to the services and to cmd/verdict-dev.
func TestLeanDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	forbidden := []string{
		"github.com/nats-io/nats-server",
		"github.com/verdict-dev/verdict/internal/controlplane",
		"github.com/verdict-dev/verdict/internal/demo",
		"k8s.io/client-go",
		"github.com/prometheus/",
		"google.golang.org/protobuf",
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if strings.HasPrefix(pkg, f) {
				t.Errorf("cmd/verdict links %s", pkg)
			}
		}
	}
}
