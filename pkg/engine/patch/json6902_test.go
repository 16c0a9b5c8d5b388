package patch

import (
	"errors"
	"reflect"
	"testing"
)

func TestJSON6902(t *testing.T) {
	const deploy = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: web
  labels: {app: web}
spec:
  replicas: 1
  template:
    spec:
      containers:
      - {name: a, image: "a:1"}
      - {name: b, image: "b:1"}
`
	tests := map[string]struct {
		patch   string
		want    string // expected object; empty means unchanged
		skipped bool
		err     error
	}{
		"add label with escaped slash (YAML)": {
			patch: `
- op: add
  path: /metadata/labels/app.kubernetes.io~1name
  value: web
`,
			want: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: web, labels: {app: web, app.kubernetes.io/name: web}},
				spec: {replicas: 1, template: {spec: {containers: [{name: a, image: "a:1"}, {name: b, image: "b:1"}]}}}}`,
		},
		"append to a list (JSON)": {
			patch: `[{"op": "add", "path": "/spec/template/spec/containers/-", "value": {"name": "c", "image": "c:1"}}]`,
			want: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: web, labels: {app: web}},
				spec: {replicas: 1, template: {spec: {containers: [{name: a, image: "a:1"}, {name: b, image: "b:1"}, {name: c, image: "c:1"}]}}}}`,
		},
		"replace by negative index": {
			patch: `[{"op": "replace", "path": "/spec/template/spec/containers/-1/image", "value": "b:2"}]`,
			want: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: web, labels: {app: web}},
				spec: {replicas: 1, template: {spec: {containers: [{name: a, image: "a:1"}, {name: b, image: "b:2"}]}}}}`,
		},
		"add creates missing parents": {
			patch: `[{"op": "add", "path": "/metadata/annotations/team", "value": "x"}]`,
			want: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: web, labels: {app: web}, annotations: {team: x}},
				spec: {replicas: 1, template: {spec: {containers: [{name: a, image: "a:1"}, {name: b, image: "b:1"}]}}}}`,
		},
		"remove and replace": {
			patch: `
- {op: remove, path: /metadata/labels}
- {op: replace, path: /spec/replicas, value: 3}
`,
			want: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: web},
				spec: {replicas: 3, template: {spec: {containers: [{name: a, image: "a:1"}, {name: b, image: "b:1"}]}}}}`,
		},
		"remove of a missing path is tolerated": {
			patch:   `[{"op": "remove", "path": "/metadata/annotations/x"}]`,
			skipped: true,
		},
		"same value is a skip": {
			patch:   `[{"op": "replace", "path": "/spec/replicas", "value": 1}]`,
			skipped: true,
		},
		"replace of a missing path fails": {
			patch: `[{"op": "replace", "path": "/spec/paused", "value": true}]`,
			err:   ErrApply,
		},
		"failed test fails": {
			patch: `[{"op": "test", "path": "/spec/replicas", "value": 2}]`,
			err:   ErrApply,
		},
		"passing test with move and copy": {
			patch: `
- {op: test, path: /spec/replicas, value: 1}
- {op: copy, from: /metadata/labels, path: /spec/template/labels}
- {op: move, from: /spec/replicas, path: /spec/minReadySeconds}
`,
			want: `{apiVersion: apps/v1, kind: Deployment, metadata: {name: web, labels: {app: web}},
				spec: {minReadySeconds: 1, template: {labels: {app: web}, spec: {containers: [{name: a, image: "a:1"}, {name: b, image: "b:1"}]}}}}`,
		},
		"copy to a missing parent fails": {
			patch: `[{"op": "copy", "from": "/metadata/labels", "path": "/status/x/y"}]`,
			err:   ErrApply,
		},
		"index out of range fails": {
			patch: `[{"op": "replace", "path": "/spec/template/spec/containers/5/image", "value": "x"}]`,
			err:   ErrApply,
		},
		"malformed YAML": {
			patch: "- op: add\n  path: [",
			err:   ErrInvalidPatch,
		},
		"not a list of operations": {
			patch: `{"op": "add"}`,
			err:   ErrInvalidPatch,
		},
		"unknown operation": {
			patch: `[{"op": "frob", "path": "/a"}]`,
			err:   ErrInvalidPatch,
		},
		"empty patch": {
			patch: "  \n",
			err:   ErrInvalidPatch,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			resource := docMap(t, deploy)
			before := deepCopy(resource)
			res, err := JSON6902(resource, tc.patch)
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
				t.Fatalf("skipped=%v changed=%v, want skipped=%v", res.Skipped, res.Changed, tc.skipped)
			}
			want := tc.want
			if want == "" {
				want = deploy
			}
			assertDoc(t, res.Object, doc(t, want))
		})
	}
}
