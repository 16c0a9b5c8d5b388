package patch

import (
	"testing"
)

// TestPreprocessOverlay checks the patch that anchors resolve to, before
// merging. Scenarios follow Kyverno's own preprocessing cases.
func TestPreprocessOverlay(t *testing.T) {
	const podWithVolumes = `
apiVersion: v1
kind: Pod
metadata: {name: static-web, labels: {role: myrole}}
spec:
  containers: [{name: web, image: 1nginx}]
  volumes:
  - {name: cache-volume, emptyDir: {}}
  - {name: token, secret: {secretName: token}}
`
	const podHostPath = `
kind: Pod
apiVersion: v1
metadata: {name: nginx}
spec:
  containers:
  - name: nginx
    image: nginx:latest
    volumeMounts: [{mountPath: /cache, name: cache-volume}]
  volumes:
  - {name: cache-volume, hostPath: {path: /data, type: Directory}}
`
	const busyboxes = `
apiVersion: v1
kind: Pod
metadata: {name: hello}
spec:
  containers:
  - {name: hello, image: "gcr.io/google-containers/busybox:latest"}
  - {name: hello2, image: "gcr.io/google-containers/busybox:latest"}
  - {name: hello3, image: "gcr.io/google-containers/nginx:latest"}
`
	tests := map[string]struct {
		overlay  string
		resource string
		want     string
		skip     bool
	}{
		"global anchor on a list element leaves only the rest": {
			overlay:  `{metadata: {annotations: {+(safe-to-evict): "true"}}, spec: {volumes: [{<(emptyDir): {}}]}}`,
			resource: podWithVolumes,
			want:     `{metadata: {annotations: {safe-to-evict: "true"}}}`,
		},
		"null is kept": {
			overlay:  `{metadata: null}`,
			resource: podWithVolumes,
			want:     `{metadata: null}`,
		},
		"wildcard name condition binds to each container": {
			overlay:  `{spec: {containers: [{(name): "*", image: busybox:latest}], imagePullSecrets: [{name: regcred}]}}`,
			resource: busyboxes,
			want: `{spec: {containers: [{name: hello, image: busybox:latest}, {name: hello2, image: busybox:latest},
				{name: hello3, image: busybox:latest}], imagePullSecrets: [{name: regcred}]}}`,
		},
		"two conditions select two containers": {
			overlay:  `{spec: {containers: [{(name): "*", (image): "gcr.io/google-containers/busybox:*", newField: inserted}]}}`,
			resource: busyboxes,
			want:     `{spec: {containers: [{name: hello, newField: inserted}, {name: hello2, newField: inserted}]}}`,
		},
		"condition-only element adds nothing": {
			overlay:  `{spec: {containers: [{(image): "gcr.io/google-containers/busybox:*"}], imagePullSecrets: [{name: regcred}]}}`,
			resource: busyboxes,
			want:     `{spec: {imagePullSecrets: [{name: regcred}]}}`,
		},
		"global anchor nested in a plain element": {
			overlay:  `{metadata: {annotations: {+(safe-to-evict): true}, labels: {+(add-labels): add}}, spec: {volumes: [{<(hostPath): {path: "*"}}]}}`,
			resource: podHostPath,
			want:     `{metadata: {annotations: {safe-to-evict: true}, labels: {add-labels: add}}}`,
		},
		"global path wildcard": {
			overlay:  `{metadata: {annotations: {+(safe-to-evict): true}}, spec: {volumes: [{hostPath: {<(path): "*data"}}]}}`,
			resource: podHostPath,
			want:     `{metadata: {annotations: {safe-to-evict: true}}}`,
		},
		"global path mismatch skips": {
			overlay:  `{metadata: {annotations: {+(safe-to-evict): true}}, spec: {volumes: [{hostPath: {<(path): "/var/*"}}]}}`,
			resource: podHostPath,
			skip:     true,
		},
		"add anchors on present keys vanish": {
			overlay:  `{metadata: {annotations: {+(a): x}}}`,
			resource: `{metadata: {name: p, annotations: {a: y}}}`,
			want:     `{}`,
		},
		"add anchors inside a list element condition": {
			overlay: `{spec: {template: {spec: {containers: [{(name): "*", resources: {limits: {+(memory): 300Mi, +(cpu): "100"}}}]}}}}`,
			resource: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: qos},
				spec: {template: {spec: {containers: [{name: nginx, image: nginx:latest, resources: {limits: {cpu: 50m}}}]}}}}`,
			want: `{spec: {template: {spec: {containers: [{name: nginx, resources: {limits: {memory: 300Mi}}}]}}}}`,
		},
		"conditions on maps, lists and add anchors together": {
			overlay: `
metadata:
  annotations: {+(annotation1): atest1, +(annotation2): atest2}
  labels: {+(label1): test1}
spec:
  (volumes): [{(hostPath): {path: /var/run/docker.sock}}]
  containers: [{(image): "*:latest", command: [ls], imagePullPolicy: Always}]
`,
			resource: `
apiVersion: v1
kind: Pod
metadata:
  annotations: {annotation1: atest2}
  labels: {label1: test2, label2: test2}
  name: check-root-user
spec:
  containers:
  - {command: [ll], image: nginx:latest, imagePullPolicy: Never, name: nginx}
  - {image: busybox:latest, imagePullPolicy: Never, name: busybox}
  volumes: [{hostPath: {path: /var/run/docker.sock}, name: test-volume}]
`,
			want: `
metadata: {annotations: {annotation2: atest2}}
spec:
  containers:
  - {command: [ls], imagePullPolicy: Always, name: nginx}
  - {command: [ls], imagePullPolicy: Always, name: busybox}
`,
		},
		"pod and container security contexts": {
			overlay: `{spec: {securityContext: {runAsNonRoot: true}, initContainers: [{(name): "*", securityContext: {runAsNonRoot: true}}],
				containers: [{(name): "*", securityContext: {runAsNonRoot: true}}]}}`,
			resource: `{spec: {initContainers: [{name: initbusy, image: busybox}], containers: [{name: busybox, image: busybox}]}}`,
			want: `{spec: {securityContext: {runAsNonRoot: true}, initContainers: [{name: initbusy, securityContext: {runAsNonRoot: true}}],
				containers: [{name: busybox, securityContext: {runAsNonRoot: true}}]}}`,
		},
		"list element condition without resource list is dropped": {
			overlay:  `{spec: {initContainers: [{(name): "*", env: [{name: A, value: b}]}], dnsPolicy: None}}`,
			resource: `{spec: {containers: [{name: a}]}}`,
			want:     `{spec: {dnsPolicy: None}}`,
		},
		// Kyverno quirk kept for compatibility: one working copy of a list
		// element serves all resource elements, so "+()" resolved on the
		// first container is not resolved again on the next ones.
		"add anchor resolved once per list (present first)": {
			overlay:  `{spec: {containers: [{(name): "*", resources: {requests: {+(memory): 100Mi}}}]}}`,
			resource: `{spec: {containers: [{name: a, resources: {requests: {memory: 1Gi}}}, {name: b}]}}`,
			want:     `{}`,
		},
		"add anchor resolved once per list (absent first)": {
			overlay:  `{spec: {containers: [{(name): "*", resources: {requests: {+(memory): 100Mi}}}]}}`,
			resource: `{spec: {containers: [{name: a}, {name: b, resources: {requests: {memory: 1Gi}}}]}}`,
			want: `{spec: {containers: [{name: a, resources: {requests: {memory: 100Mi}}},
				{name: b, resources: {requests: {memory: 100Mi}}}]}}`,
		},
		"resource elements without a name are not patched": {
			overlay:  `{spec: {ports: [{(port): "80", name: http}]}}`,
			resource: `{spec: {ports: [{port: 80}]}}`,
			want:     `{}`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			overlay := docMap(t, tc.overlay)
			err := preprocessOverlay(overlay, docMap(t, tc.resource), nil)
			if tc.skip {
				if _, ok := asSkip(err); !ok {
					t.Fatalf("want a skip, got %v and\n%s", err, toYAML(overlay))
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			assertDoc(t, any(overlay), doc(t, tc.want))
		})
	}
}
