package patch

import (
	"errors"
	"reflect"
	"strings"
	"testing"
)

const podNginx = `
apiVersion: v1
kind: Pod
metadata:
  name: web
  labels:
    app: web
spec:
  containers:
  - name: nginx
    image: nginx:latest
  - name: sidecar
    image: envoy:1.2
`

func TestStrategicMerge(t *testing.T) {
	tests := map[string]struct {
		resource string
		overlay  string
		want     string // expected object; empty means the resource itself
		skipped  bool
		reason   string // substring of SkipReason
		err      error
	}{
		"add label and keep others": {
			resource: podNginx,
			overlay:  `{metadata: {labels: {team: a}}}`,
			want:     strings.Replace(podNginx, "app: web", "app: web\n    team: a", 1),
		},
		"null deletes key": {
			resource: podNginx,
			overlay:  `{metadata: {labels: {app: null}}}`,
			want:     strings.Replace(podNginx, "  labels:\n    app: web\n", "  labels: {}\n", 1),
		},
		"null on missing key changes nothing": {
			resource: podNginx,
			overlay:  `{metadata: {annotations: {a: null}}}`,
			want:     strings.Replace(podNginx, "  name: web\n", "  name: web\n  annotations: {}\n", 1),
		},
		"scalar replaced": {
			resource: podNginx,
			overlay:  `{metadata: {name: other}}`,
			want:     strings.Replace(podNginx, "name: web", "name: other", 1),
		},
		"same value is a skip": {
			resource: podNginx,
			overlay:  `{metadata: {labels: {app: web}}}`,
			skipped:  true,
			reason:   ReasonNoChange,
		},
		"containers merge by name, patched ones first": {
			resource: podNginx,
			overlay:  `{spec: {containers: [{name: sidecar, image: envoy:1.3}]}}`,
			want: `
apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec:
  containers:
  - {name: sidecar, image: envoy:1.3}
  - {name: nginx, image: nginx:latest}
`,
		},
		"list $patch replace": {
			resource: podNginx,
			overlay:  `{spec: {containers: [{name: only, image: x}, {$patch: replace}]}}`,
			want:     `{apiVersion: v1, kind: Pod, metadata: {name: web, labels: {app: web}}, spec: {containers: [{name: only, image: x}]}}`,
		},
		"list $patch delete": {
			resource: podNginx,
			overlay:  `{spec: {containers: [{$patch: delete}]}}`,
			want:     `{apiVersion: v1, kind: Pod, metadata: {name: web, labels: {app: web}}, spec: {}}`,
		},
		"new container is placed first": {
			resource: podNginx,
			overlay:  `{spec: {containers: [{name: agent, image: vault}]}}`,
			want: `
apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec:
  containers:
  - {name: agent, image: vault}
  - {name: nginx, image: nginx:latest}
  - {name: sidecar, image: envoy:1.2}
`,
		},
		"patch order wins for named containers": {
			resource: podNginx,
			overlay:  `{spec: {containers: [{name: sidecar, tty: true}]}}`,
			want: `
apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec:
  containers:
  - {name: sidecar, image: envoy:1.2, tty: true}
  - {name: nginx, image: nginx:latest}
`,
		},
		"$patch delete removes a container": {
			resource: podNginx,
			overlay:  `{spec: {containers: [{name: sidecar, $patch: delete}]}}`,
			want: `
apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec:
  containers:
  - {name: nginx, image: nginx:latest}
`,
		},
		"$patch replace replaces a map": {
			resource: podNginx,
			overlay:  `{metadata: {labels: {$patch: replace, tier: x}}}`,
			want:     strings.Replace(podNginx, "app: web", "tier: x", 1),
		},
		"unknown $patch directive is an error": {
			resource: podNginx,
			overlay:  `{metadata: {labels: {$patch: frobnicate}}}`,
			err:      ErrInvalidPatch,
		},
		"scalar list is replaced": {
			resource: `{apiVersion: v1, kind: Pod, spec: {containers: [{name: a, args: [x, y]}]}}`,
			overlay:  `{spec: {containers: [{name: a, args: [z]}]}}`,
			want:     `{apiVersion: v1, kind: Pod, spec: {containers: [{name: a, args: [z]}]}}`,
		},
		"finalizers merge as a set": {
			resource: `{apiVersion: v1, kind: Pod, metadata: {name: p, finalizers: [a, b]}}`,
			overlay:  `{metadata: {finalizers: [c, a]}}`,
			want:     `{apiVersion: v1, kind: Pod, metadata: {name: p, finalizers: [c, a, b]}}`,
		},
		"env merges by name": {
			resource: `{apiVersion: apps/v1, kind: Deployment, spec: {template: {spec: {containers: [{name: a, env: [{name: X, value: "1"}, {name: Y, value: "2"}]}]}}}}`,
			overlay:  `{spec: {template: {spec: {containers: [{name: a, env: [{name: Y, value: "3"}]}]}}}}`,
			want:     `{apiVersion: apps/v1, kind: Deployment, spec: {template: {spec: {containers: [{name: a, env: [{name: Y, value: "3"}, {name: X, value: "1"}]}]}}}}`,
		},
		"volumeMounts merge by mountPath": {
			resource: `{apiVersion: v1, kind: Pod, spec: {containers: [{name: a, volumeMounts: [{name: v, mountPath: /a}]}]}}`,
			overlay:  `{spec: {containers: [{name: a, volumeMounts: [{name: v, mountPath: /b}]}]}}`,
			want:     `{apiVersion: v1, kind: Pod, spec: {containers: [{name: a, volumeMounts: [{name: v, mountPath: /b}, {name: v, mountPath: /a}]}]}}`,
		},
		"ports merge by containerPort and protocol": {
			resource: `{apiVersion: v1, kind: Pod, spec: {containers: [{name: a, ports: [{containerPort: 80, protocol: TCP}, {containerPort: 53, protocol: UDP}]}]}}`,
			overlay:  `{spec: {containers: [{name: a, ports: [{containerPort: 53, protocol: UDP, name: dns}, {containerPort: 53, protocol: TCP}]}]}}`,
			want:     `{apiVersion: v1, kind: Pod, spec: {containers: [{name: a, ports: [{containerPort: 53, protocol: UDP, name: dns}, {containerPort: 53, protocol: TCP}, {containerPort: 80, protocol: TCP}]}]}}`,
		},
		"pod volumes (merge,retainKeys) merge by name": {
			resource: `{apiVersion: v1, kind: Pod, spec: {volumes: [{name: a, emptyDir: {medium: Memory}}]}}`,
			overlay:  `{spec: {volumes: [{name: b, configMap: {name: cm}}]}}`,
			want:     `{apiVersion: v1, kind: Pod, spec: {volumes: [{name: b, configMap: {name: cm}}, {name: a, emptyDir: {medium: Memory}}]}}`,
		},
		"tolerations (no strategy) are replaced": {
			resource: `{apiVersion: v1, kind: Pod, spec: {tolerations: [{key: a, operator: Exists}]}}`,
			overlay:  `{spec: {tolerations: [{key: b, operator: Exists}]}}`,
			want:     `{apiVersion: v1, kind: Pod, spec: {tolerations: [{key: b, operator: Exists}]}}`,
		},
		"custom resource lists are replaced": {
			resource: `{apiVersion: example.com/v1, kind: Widget, spec: {containers: [{name: a}, {name: b}]}}`,
			overlay:  `{spec: {containers: [{name: b, image: x}]}}`,
			want:     `{apiVersion: example.com/v1, kind: Widget, spec: {containers: [{name: b, image: x}]}}`,
		},
		"kind mismatch is an error": {
			resource: podNginx,
			overlay:  `{spec: {containers: {name: x}}}`,
			err:      ErrApply,
		},
		"overlay must be a map": {
			resource: podNginx,
			overlay:  `[1]`,
			err:      ErrInvalidPatch,
		},
		"empty maps in the overlay are dropped": {
			resource: `{apiVersion: v1, kind: Pod, spec: {containers: [{name: a}]}}`,
			overlay:  `{spec: {volumes: [{name: cache, emptyDir: {}}]}}`,
			want:     `{apiVersion: v1, kind: Pod, spec: {containers: [{name: a}], volumes: [{name: cache}]}}`,
		},
		"nulls in the resource are dropped by the walk": {
			resource: `{apiVersion: v1, kind: Pod, metadata: {name: p, creationTimestamp: null}}`,
			overlay:  `{metadata: {labels: {a: b}}}`,
			want:     `{apiVersion: v1, kind: Pod, metadata: {name: p, labels: {a: b}}}`,
		},

		// Add-if-not-present anchors.
		"+() adds a missing key": {
			resource: podNginx,
			overlay:  `{metadata: {labels: {+(team): a, +(app): other}}}`,
			want:     strings.Replace(podNginx, "app: web", "app: web\n    team: a", 1),
		},
		"+() on a present key is a skip": {
			resource: podNginx,
			overlay:  `{metadata: {labels: {+(app): other}}}`,
			skipped:  true,
			reason:   ReasonNoChange,
		},
		"nested +() adds a whole subtree": {
			resource: `{apiVersion: v1, kind: Pod, spec: {containers: [{name: a}]}}`,
			overlay:  `{spec: {+(securityContext): {+(runAsNonRoot): true}}}`,
			want:     `{apiVersion: v1, kind: Pod, spec: {containers: [{name: a}], securityContext: {runAsNonRoot: true}}}`,
		},

		// Conditional anchors.
		"map condition holds": {
			resource: podNginx,
			overlay:  `{metadata: {labels: {(app): web, tier: front}}}`,
			want:     strings.Replace(podNginx, "app: web", "app: web\n    tier: front", 1),
		},
		"map condition fails: skip": {
			resource: podNginx,
			overlay:  `{metadata: {labels: {(app): db, tier: front}}}`,
			skipped:  true,
			reason:   "conditional anchor mismatch",
		},
		"map condition on missing key: skip": {
			resource: podNginx,
			overlay:  `{metadata: {annotations: {(x): "*"}, labels: {tier: front}}}`,
			skipped:  true,
			reason:   "conditional anchor mismatch",
		},
		"list condition selects every container": {
			resource: podNginx,
			overlay:  `{spec: {containers: [{(name): "*", imagePullPolicy: Always}]}}`,
			want: `
apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec:
  containers:
  - {name: nginx, image: nginx:latest, imagePullPolicy: Always}
  - {name: sidecar, image: envoy:1.2, imagePullPolicy: Always}
`,
		},
		"list condition selects matching containers": {
			resource: podNginx,
			overlay:  `{spec: {containers: [{(image): "*:latest", imagePullPolicy: Always}]}}`,
			want: `
apiVersion: v1
kind: Pod
metadata: {name: web, labels: {app: web}}
spec:
  containers:
  - {name: nginx, image: nginx:latest, imagePullPolicy: Always}
  - {name: sidecar, image: envoy:1.2}
`,
		},
		"list condition matching nothing: skip": {
			resource: podNginx,
			overlay:  `{spec: {containers: [{(image): "redis*", imagePullPolicy: Always}]}}`,
			skipped:  true,
			reason:   ReasonNoChange,
		},
		"list condition with operator": {
			resource: `{apiVersion: v1, kind: Pod, spec: {containers: [{name: a, image: "x:1.2"}, {name: b, image: "x:2.0"}]}}`,
			overlay:  `{spec: {containers: [{(image): "x:1.* | x:0.*", env: [{name: OLD, value: "1"}]}]}}`,
			want:     `{apiVersion: v1, kind: Pod, spec: {containers: [{name: a, image: "x:1.2", env: [{name: OLD, value: "1"}]}, {name: b, image: "x:2.0"}]}}`,
		},
		// Kyverno quirk kept for compatibility: a condition on a map value
		// with non-anchor leaves is written into the patch as a plain key.
		"nested condition values leak into the patch": {
			resource: `{apiVersion: v1, kind: Pod, spec: {containers: [{name: a, resources: {limits: {memory: 2Gi}}}, {name: b, resources: {limits: {memory: 512Mi}}}]}}`,
			overlay:  `{spec: {containers: [{(resources): {limits: {memory: ">1Gi"}}, env: [{name: BIG, value: "1"}]}]}}`,
			want:     `{apiVersion: v1, kind: Pod, spec: {containers: [{name: a, resources: {limits: {memory: ">1Gi"}}, env: [{name: BIG, value: "1"}]}, {name: b, resources: {limits: {memory: 512Mi}}}]}}`,
		},
		"condition compares scalars as text": {
			resource: `{apiVersion: apps/v1, kind: Deployment, spec: {replicas: 3}}`,
			overlay:  `{spec: {(replicas): "3", paused: true}}`,
			want:     `{apiVersion: apps/v1, kind: Deployment, spec: {replicas: 3, paused: true}}`,
		},
		"condition with numeric operator": {
			resource: `{apiVersion: apps/v1, kind: Deployment, spec: {replicas: 3}}`,
			overlay:  `{spec: {(replicas): ">5", paused: true}}`,
			skipped:  true,
			reason:   "conditional anchor mismatch",
		},

		// Global anchors.
		"global anchor on a list element holds for one element": {
			resource: `{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {volumes: [{name: a, hostPath: {path: /x}}, {name: b, emptyDir: {}}]}}`,
			overlay:  `{metadata: {annotations: {+(safe-to-evict): "true"}}, spec: {volumes: [{<(emptyDir): {}}]}}`,
			want:     `{apiVersion: v1, kind: Pod, metadata: {name: p, annotations: {safe-to-evict: "true"}}, spec: {volumes: [{name: a, hostPath: {path: /x}}, {name: b, emptyDir: {}}]}}`,
		},
		"global anchor on a list element holds for none: skip": {
			resource: `{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {volumes: [{name: a, hostPath: {path: /x}}]}}`,
			overlay:  `{metadata: {annotations: {+(safe-to-evict): "true"}}, spec: {volumes: [{<(emptyDir): {}}]}}`,
			skipped:  true,
			reason:   "global anchor mismatch",
		},
		"global anchor on a missing list: skip": {
			resource: `{apiVersion: v1, kind: Pod, metadata: {name: p}, spec: {containers: [{name: a}]}}`,
			overlay:  `{metadata: {annotations: {x: "y"}}, spec: {volumes: [{hostPath: {<(path): "*"}}]}}`,
			skipped:  true,
			reason:   "global anchor mismatch",
		},
		"global anchor selects by image, patch elsewhere": {
			resource: `{apiVersion: v1, kind: Pod, spec: {containers: [{name: a, image: corp.reg.com/app}]}}`,
			overlay:  `{spec: {containers: [{<(image): "corp.reg.com/*"}], imagePullSecrets: [{name: my-secret}]}}`,
			want:     `{apiVersion: v1, kind: Pod, spec: {containers: [{name: a, image: corp.reg.com/app}], imagePullSecrets: [{name: my-secret}]}}`,
		},
		"global anchor in a map fails: skip": {
			resource: `{apiVersion: v1, kind: Pod, spec: {containers: [{name: a, image: docker.io/app}]}}`,
			overlay:  `{spec: {containers: [{<(image): "corp.reg.com/*"}], imagePullSecrets: [{name: my-secret}]}}`,
			skipped:  true,
			reason:   "global anchor mismatch",
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			resource := docMap(t, tc.resource)
			before := deepCopy(resource)
			res, err := StrategicMerge(resource, doc(t, tc.overlay))
			if !reflect.DeepEqual(before, any(resource)) {
				t.Fatalf("input resource was modified")
			}
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("error = %v, want %v", err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if res.Skipped != tc.skipped || res.Changed == tc.skipped {
				t.Fatalf("skipped=%v changed=%v reason=%q, want skipped=%v\n%s", res.Skipped, res.Changed, res.SkipReason, tc.skipped, toYAML(res.Object))
			}
			if tc.reason != "" && !strings.Contains(res.SkipReason, tc.reason) {
				t.Errorf("reason = %q, want it to contain %q", res.SkipReason, tc.reason)
			}
			want := tc.want
			if want == "" {
				want = tc.resource
			}
			assertDoc(t, res.Object, doc(t, want))
		})
	}
}

func TestStrategicMergeDoesNotShareMemory(t *testing.T) {
	resource := docMap(t, podNginx)
	overlay := doc(t, `{metadata: {labels: {team: a}}, spec: {containers: [{name: x, args: [a]}]}}`)
	overlayBefore := deepCopy(overlay)
	res, err := StrategicMerge(resource, overlay)
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(overlay, overlayBefore) {
		t.Fatalf("overlay was modified")
	}
	res.Object["metadata"].(map[string]any)["labels"].(map[string]any)["app"] = "changed"
	containers := res.Object["spec"].(map[string]any)["containers"].([]any)
	containers[0].(map[string]any)["args"].([]any)[0] = "changed"
	if resource["metadata"].(map[string]any)["labels"].(map[string]any)["app"] != "web" {
		t.Fatalf("result shares memory with the resource")
	}
	if overlay.(map[string]any)["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["args"].([]any)[0] != "a" {
		t.Fatalf("result shares memory with the overlay")
	}
}

// TestForeachOrder shows how a caller must run a foreach of strategic merge
// patches to keep list order: like Kyverno, over the elements in reverse,
// because each patch moves the element it names to the front.
func TestForeachOrder(t *testing.T) {
	resource := docMap(t, `
apiVersion: v1
kind: Pod
metadata: {name: nginx-demo3}
spec:
  containers:
  - {name: nginx, image: nginx:latest, resources: {requests: {memory: 200Mi}}}
  - {name: busybox, image: busybox:latest}
`)
	overlayFor := func(name string) any {
		return doc(t, `{spec: {containers: [{(name): `+name+`, resources: {requests: {+(memory): 100Mi, +(cpu): 100m}}}]}}`)
	}
	current := resource
	for _, name := range []string{"busybox", "nginx"} { // reverse of the list
		res, err := StrategicMerge(current, overlayFor(name))
		if err != nil {
			t.Fatal(err)
		}
		if !res.Changed {
			t.Fatalf("%s: not changed", name)
		}
		current = res.Object
	}
	assertDoc(t, any(current), doc(t, `
apiVersion: v1
kind: Pod
metadata: {name: nginx-demo3}
spec:
  containers:
  - {name: nginx, image: nginx:latest, resources: {requests: {memory: 200Mi, cpu: 100m}}}
  - {name: busybox, image: busybox:latest, resources: {requests: {memory: 100Mi, cpu: 100m}}}
`))
}

func TestStrategicMergeDeleteWholeResource(t *testing.T) {
	_, err := StrategicMerge(docMap(t, podNginx), doc(t, `{$patch: delete}`))
	if !errors.Is(err, ErrApply) {
		t.Fatalf("error = %v, want ErrApply", err)
	}
}

func BenchmarkStrategicMerge(b *testing.B) {
	resource := docMap(b, `
apiVersion: apps/v1
kind: Deployment
metadata: {name: web, labels: {app: web}}
spec:
  replicas: 3
  template:
    metadata: {labels: {app: web}}
    spec:
      containers:
      - {name: a, image: "a:latest", env: [{name: X, value: "1"}], ports: [{containerPort: 80}]}
      - {name: b, image: "b:1.2", resources: {limits: {memory: 1Gi}}}
      volumes: [{name: cache, emptyDir: {}}]
`)
	overlay := doc(b, `{metadata: {annotations: {+(team): a}}, spec: {template: {spec: {containers: [{(image): "*:latest", imagePullPolicy: Always}]}}}}`)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := StrategicMerge(resource, overlay); err != nil {
			b.Fatal(err)
		}
	}
}
