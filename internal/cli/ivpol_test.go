package cli

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/verdict-dev/verdict/internal/testkit/ocitest"
)

// TestImageValidatingPolicySuite runs `verdict test` on a suite in
// Kyverno's layout (isImageValidatingPolicy results) whose
// ImageValidatingPolicy verifies cosign signatures against a registry in
// the test process: the signed Pod passes, the unsigned one fails, and
// a CEL PolicyException exempts a third.
func TestImageValidatingPolicySuite(t *testing.T) {
	reg := ocitest.NewRegistry(t)
	key := ocitest.NewKey(t)
	signed := reg.PushImage(t, "trusted/app", "v1")
	reg.Sign(t, signed.Ref, key)
	unsigned := reg.PushImage(t, "trusted/unsigned", "v1")
	dir := t.TempDir()
	pad := "          "
	files := map[string]string{
		"policy.yaml": fmt.Sprintf(`apiVersion: policies.kyverno.io/v1beta1
kind: ImageValidatingPolicy
metadata: {name: signed-images}
spec:
  validationConfigurations: {verifyDigest: false}
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [pods]}
  matchImageReferences:
  - glob: "%s/*"
  attestors:
  - name: ours
    cosign:
      key:
        data: |
%s
      ctlog: {insecureIgnoreTlog: true}
  validations:
  - expression: images.containers.map(i, verifyImageSignatures(i, [attestors.ours])).all(n, n > 0)
    message: not signed by our key
`, reg.Host(), pad+strings.ReplaceAll(strings.TrimSpace(key.PublicKeyPEM()), "\n", "\n"+pad)),
		"exception.yaml": `apiVersion: policies.kyverno.io/v1beta1
kind: PolicyException
metadata: {name: legacy}
spec:
  policyRefs: [{name: signed-images, kind: ImageValidatingPolicy}]
  matchConditions:
  - {name: legacy, expression: "object.metadata.name == 'legacy-pod'"}
`,
		"resources.yaml": fmt.Sprintf(`apiVersion: v1
kind: Pod
metadata: {name: good-pod, namespace: default}
spec: {containers: [{name: c, image: %s}]}
---
apiVersion: v1
kind: Pod
metadata: {name: bad-pod, namespace: default}
spec: {containers: [{name: c, image: %s}]}
---
apiVersion: v1
kind: Pod
metadata: {name: legacy-pod, namespace: default}
spec: {containers: [{name: c, image: %s}]}
`, signed.Tag, unsigned.Tag, unsigned.Tag),
		"kyverno-test.yaml": `apiVersion: cli.kyverno.io/v1alpha1
kind: Test
metadata: {name: ivpol}
policies: [policy.yaml]
resources: [resources.yaml]
exceptions: [exception.yaml]
results:
- {isImageValidatingPolicy: true, kind: Pod, policy: signed-images, resources: [good-pod], result: pass}
- {isImageValidatingPolicy: true, kind: Pod, policy: signed-images, resources: [bad-pod], result: fail}
- {isImageValidatingPolicy: true, kind: Pod, policy: signed-images, resources: [legacy-pod], result: skip}
`,
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	var out strings.Builder
	sum, err := RunTests(t.Context(), TestOptions{Dirs: []string{dir}}, &out)
	if err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if sum.Passed != 3 || sum.Failed != 0 || sum.Unsupported != 0 || len(sum.Errors) != 0 {
		t.Errorf("passed %d, failed %d, unsupported %d, errors %v; want 3 passed\n%s", sum.Passed, sum.Failed, sum.Unsupported, sum.Errors, out.String())
	}
}
