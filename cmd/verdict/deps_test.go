package main

import (
	"os/exec"
	"strings"
	"testing"
)

// The pipeline CLI stays lean: it links no NATS server, no control-plane
// harness, and of client-go only what apply --cluster and compare need to
// read a cluster: clientcmd (the kubeconfig), rest and dynamic, with
// what they bring (transport, the exec credential plugin, flow control).
// Linking them cost 1.9 MB of binary (70.9 to 72.8 MB, +2.7%) and no
// measurable start-up time: client-go's package initialisations take
// 0.5 ms, and 50 runs of `verdict test internal/cli/testdata/outputs`
// took a median 183.9 ms with and without them (BENCHMARKS.md, "The CLI
// and client-go"). Discovery is read with plain GETs (internal/cli
// kube.go): client-go's discovery package links the typed clientset's
// scheme (every built-in type registered at start-up), which stays out
// with the typed clientset, informers, listers and the cache. Those
// belong to the services and to cmd/verdict-dev.
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
	}
	// The client-go packages the CLI may link; any other is an error
	// (k8s.io/client-go/kubernetes, informers, listers, tools/cache,
	// discovery, metadata, ...).
	clientGo := []string{
		"rest", "dynamic", "tools/clientcmd", "tools/auth", "tools/metrics", "transport",
		"plugin/pkg/client/auth/exec", "pkg/apis/clientauthentication", "pkg/version", "features",
		"util/cert", "util/keyutil", "util/connrotation", "util/flowcontrol", "util/homedir", "util/workqueue", "util/apply",
	}
	linked := 0
	for _, pkg := range strings.Fields(string(out)) {
		for _, f := range forbidden {
			if strings.HasPrefix(pkg, f) {
				t.Errorf("cmd/verdict links %s", pkg)
			}
		}
		rest, ok := strings.CutPrefix(pkg, "k8s.io/client-go/")
		if !ok {
			continue
		}
		linked++
		allowed := false
		for _, a := range clientGo {
			if rest == a || strings.HasPrefix(rest, a+"/") {
				allowed = true
			}
		}
		if !allowed {
			t.Errorf("cmd/verdict links %s: of client-go, the CLI links the kubeconfig, rest and dynamic clients only", pkg)
		}
	}
	if linked == 0 {
		t.Error("cmd/verdict links no client-go package: this test's list no longer means anything")
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
