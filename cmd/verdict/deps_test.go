package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The pipeline CLI stays lean: it links no NATS server, no control-plane
// harness and no Kubernetes client (informers, REST clients). Those belong
// to the services and to cmd/verdict-dev.
//
// The CLI does link protobuf and the prometheus client since it evaluates
// CEL: cel-go is built on protobuf, and the Kubernetes CEL libraries
// (k8s.io/apiserver/pkg/cel/library) reach the prometheus client through
// the API server's feature gates. TestQueueLinksNoMetricsClient keeps
// the CLI's NATS side from bringing them too.
func TestLeanDependencies(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	forbidden := []string{
		"github.com/nats-io/nats-server",
		"github.com/verdict-dev/verdict/internal/testkit",
		"github.com/verdict-dev/verdict/internal/demo",
		"k8s.io/client-go",
	}
	for _, pkg := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if strings.HasPrefix(pkg, f) {
				t.Errorf("cmd/verdict links %s", pkg)
			}
		}
	}
}

// The CLI's NATS side (verdict work) links neither protobuf nor the
// prometheus client: pkg/queue records its metrics through its own
// interfaces, pkg/queue/queueprom is the services'. Only the CEL evaluator
// brings them into the CLI.
func TestQueueLinksNoMetricsClient(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", "../../internal/cli").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	deps := strings.Fields(string(out))
	cel := false
	for _, pkg := range deps {
		if pkg == "github.com/verdict-dev/verdict/pkg/engine/celeval" {
			cel = true
		}
	}
	if !cel {
		t.Fatal("internal/cli does not link pkg/engine/celeval: this test no longer means anything")
	}
	out, err = exec.Command("go", "list", "-deps", "../../pkg/queue", "../../internal/platform/natsconn").Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if strings.HasPrefix(pkg, "github.com/prometheus/") || strings.HasPrefix(pkg, "google.golang.org/protobuf") {
			t.Errorf("pkg/queue or internal/platform/natsconn links %s", pkg)
		}
	}
}
