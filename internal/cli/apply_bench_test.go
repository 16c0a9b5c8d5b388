package cli

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/verdict-dev/verdict/internal/testkit/ocitest"
)

// benchDir holds the fixed workloads of ../shared/bench.
const benchDir = "../../../shared/bench"

// BenchmarkApplyPSS1000 is `verdict apply -p pss-classic -r
// pods-1000.yaml` in process, table output discarded: 24 Pod Security
// policies against 1,000 Pods (24,000 results).
func BenchmarkApplyPSS1000(b *testing.B) {
	if _, err := os.Stat(benchDir + "/pods-1000.yaml"); err != nil {
		b.Skipf("bench workloads not found: %v", err)
	}
	opts := ApplyOptions{
		Policies:  []string{benchDir + "/pss-classic"},
		Resources: []string{benchDir + "/pods-1000.yaml"},
	}
	for b.Loop() {
		counts, err := Apply(b.Context(), opts, bytes.NewReader(nil), io.Discard)
		if err != nil {
			b.Fatal(err)
		}
		if counts.Pass != 20892 || counts.Fail != 3108 {
			b.Fatalf("pass %d fail %d, want 20892 and 3108", counts.Pass, counts.Fail)
		}
	}
}

// BenchmarkApplyCEL is `verdict apply` of the CEL workloads on the 1,000
// Pods: pss-vpol (16 ValidatingPolicies) and pss-cel (ClusterPolicies
// with validate.cel), with the reference CLI's counts.
func BenchmarkApplyCEL(b *testing.B) {
	if _, err := os.Stat(benchDir + "/pods-1000.yaml"); err != nil {
		b.Skipf("bench workloads not found: %v", err)
	}
	for _, w := range []struct {
		name       string
		pass, fail int
	}{{"pss-vpol", 14955, 1045}, {"pss-cel", 17905, 1095}} {
		b.Run(w.name, func(b *testing.B) {
			opts := ApplyOptions{
				Policies:  []string{benchDir + "/" + w.name},
				Resources: []string{benchDir + "/pods-1000.yaml"},
			}
			for b.Loop() {
				counts, err := Apply(b.Context(), opts, bytes.NewReader(nil), io.Discard)
				if err != nil {
					b.Fatal(err)
				}
				if counts.Pass != w.pass || counts.Fail != w.fail {
					b.Fatalf("pass %d fail %d, want %d and %d", counts.Pass, counts.Fail, w.pass, w.fail)
				}
			}
		})
	}
}

// BenchmarkApplySignedImages is `verdict apply` of a verifyImages
// ClusterPolicy (a cosign key signature, mutateDigest) on 1,000 Pods of
// 10 images, against a registry in the benchmark's process on loopback:
// each image is verified once per run, the other 990 Pods from the run's
// cache.
//
//	go test -run '^$' -bench BenchmarkApplySignedImages -benchmem ./internal/cli/
func BenchmarkApplySignedImages(b *testing.B) {
	reg := ocitest.NewRegistry(b)
	key := ocitest.NewKey(b)
	var images []string
	for i := range 10 {
		img := reg.PushImage(b, fmt.Sprintf("trusted/app%d", i), "v1")
		reg.Sign(b, img.Ref, key)
		images = append(images, img.Tag)
	}
	k, err := json.Marshal(key.PublicKeyPEM())
	if err != nil {
		b.Fatal(err)
	}
	dir := b.TempDir()
	policy := `{"apiVersion":"kyverno.io/v1","kind":"ClusterPolicy","metadata":{"name":"signed-images"},
"spec":{"validationFailureAction":"Enforce","rules":[{"name":"signed",
"match":{"any":[{"resources":{"kinds":["Pod"]}}]},
"verifyImages":[{"imageReferences":["` + reg.Host() + `/trusted/*"],"attestors":[{"entries":[{"keys":{"publicKeys":` + string(k) + `,
"rekor":{"url":"https://rekor.example","ignoreTlog":true},"ctlog":{"ignoreSCT":true}}}]}]}]}]}}`
	var pods strings.Builder
	for i := range 1000 {
		fmt.Fprintf(&pods, "---\napiVersion: v1\nkind: Pod\nmetadata: {name: app-%d, namespace: team}\nspec:\n  containers:\n  - {name: c, image: %q}\n", i, images[i%len(images)])
	}
	for name, content := range map[string]string{"policy.json": policy, "pods.yaml": pods.String()} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
			b.Fatal(err)
		}
	}
	opts := ApplyOptions{Policies: []string{filepath.Join(dir, "policy.json")}, Resources: []string{filepath.Join(dir, "pods.yaml")}}
	for b.Loop() {
		counts, err := Apply(b.Context(), opts, bytes.NewReader(nil), io.Discard)
		if err != nil {
			b.Fatal(err)
		}
		if counts.Pass != 1000 || counts.Fail+counts.Error != 0 {
			b.Fatalf("%+v, want 1000 passes", counts)
		}
	}
}
