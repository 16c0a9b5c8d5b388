package crds_test

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/verdict-dev/verdict/deploy/crds"
	"github.com/verdict-dev/verdict/internal/tools/crdgen"
)

// TestGenerated fails when a CRD generated from pkg/engine/policy
// (internal/tools/crdgen) is not the file checked in here.
func TestGenerated(t *testing.T) {
	docs, err := crdgen.LoadDocs(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	files, err := crdgen.Generate(docs)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range files {
		have, err := crds.FS.ReadFile(name)
		if err != nil {
			t.Errorf("%s: %v; run `make crds`", name, err)
			continue
		}
		if !bytes.Equal(have, want) {
			t.Errorf("deploy/crds/%s differs from what hack/crdgen generates (%s); run `make crds`", name, firstDiff(have, want))
		}
	}
}

// firstDiff names the first line where have and want differ.
func firstDiff(have, want []byte) string {
	h, w := bytes.Split(have, []byte("\n")), bytes.Split(want, []byte("\n"))
	for i := 0; i < len(h) && i < len(w); i++ {
		if !bytes.Equal(h[i], w[i]) {
			return fmt.Sprintf("line %d: have %q, want %q", i+1, bytes.TrimSpace(h[i]), bytes.TrimSpace(w[i]))
		}
	}
	return fmt.Sprintf("have %d lines, want %d", len(h), len(w))
}
