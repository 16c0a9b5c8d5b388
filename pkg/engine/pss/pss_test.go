package pss

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// pod builds a Pod document from the YAML of its spec (and optional
// metadata annotations), so cases read like the manifests they stand for.
func pod(t *testing.T, specYAML string, annotations ...string) map[string]any {
	t.Helper()
	var spec map[string]any
	if err := yaml.Unmarshal([]byte(specYAML), &spec); err != nil {
		t.Fatalf("bad spec YAML: %v", err)
	}
	meta := map[string]any{"name": "test"}
	if len(annotations) > 0 {
		a := map[string]any{}
		for i := 0; i+1 < len(annotations); i += 2 {
			a[annotations[i]] = annotations[i+1]
		}
		meta["annotations"] = a
	}
	return map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}
}

// restrictedOK is a container fragment that passes every restricted check
// when the pod sets runAsNonRoot and a seccomp profile.
const restrictedOK = `
  securityContext:
    allowPrivilegeEscalation: false
    capabilities:
      drop: [ALL]`

const podSecure = `
securityContext:
  runAsNonRoot: true
  seccompProfile:
    type: RuntimeDefault
`

func ids(r Result) []string {
	var out []string
	for _, c := range r.Failed {
		out = append(out, c.ID)
	}
	return out
}

func TestCheckProfiles(t *testing.T) {
	tests := map[string]struct {
		level, version string
		spec           string
		annotations    []string
		wantFailed     []string // nil: allowed
	}{
		"baseline minimal pod": {
			level: "baseline", spec: `
containers:
- name: c
  image: nginx`,
		},
		"baseline privileged": {
			level: "baseline", spec: `
containers:
- name: c
  image: nginx
  securityContext:
    privileged: true`,
			wantFailed: []string{"privileged"},
		},
		"baseline host namespaces and ports": {
			level: "baseline", spec: `
hostNetwork: true
hostPID: true
containers:
- name: c
  image: nginx
  ports:
  - containerPort: 80
    hostPort: 8080`,
			wantFailed: []string{"hostNamespaces", "hostPorts"},
		},
		"baseline hostPath": {
			level: "baseline", spec: `
containers:
- name: c
  image: nginx
volumes:
- name: v
  hostPath:
    path: /var/run/docker.sock`,
			wantFailed: []string{"hostPathVolumes"},
		},
		"restricted hostPath fails both volume checks": {
			level: "restricted", spec: podSecure + `
containers:
- name: c
  image: nginx` + restrictedOK + `
volumes:
- name: v
  hostPath:
    path: /data`,
			wantFailed: []string{"hostPathVolumes", "restrictedVolumes"},
		},
		"baseline allowed capability": {
			level: "baseline", spec: `
containers:
- name: c
  image: nginx
  securityContext:
    capabilities:
      add: [NET_BIND_SERVICE, CHOWN]`,
		},
		"baseline forbidden capability": {
			level: "baseline", spec: `
initContainers:
- name: i
  image: busybox
  securityContext:
    capabilities:
      add: [SYS_ADMIN]
containers:
- name: c
  image: nginx`,
			wantFailed: []string{"capabilities_baseline"},
		},
		"baseline ignores restricted fields": {
			level: "baseline", spec: `
securityContext:
  runAsUser: 0
containers:
- name: c
  image: nginx
  securityContext:
    allowPrivilegeEscalation: true
    runAsNonRoot: false`,
		},
		"restricted compliant": {
			level: "restricted", spec: podSecure + `
containers:
- name: c
  image: nginx` + restrictedOK,
		},
		"restricted bare pod": {
			level: "restricted", spec: `
containers:
- name: c
  image: nginx`,
			wantFailed: []string{"allowPrivilegeEscalation", "capabilities_restricted", "runAsNonRoot", "seccompProfile_restricted"},
		},
		"restricted runAsNonRoot false in container": {
			level: "restricted", spec: podSecure + `
containers:
- name: c
  image: nginx
  securityContext:
    runAsNonRoot: false
    allowPrivilegeEscalation: false
    capabilities:
      drop: [ALL]`,
			wantFailed: []string{"runAsNonRoot"},
		},
		"restricted runAsUser 0": {
			level: "restricted", spec: `
securityContext:
  runAsNonRoot: true
  runAsUser: 0
  seccompProfile:
    type: Localhost
    localhostProfile: p.json
containers:
- name: c
  image: nginx` + restrictedOK,
			wantFailed: []string{"runAsUser"},
		},
		"restricted unconfined seccomp fails both seccomp checks": {
			level: "restricted", spec: `
securityContext:
  runAsNonRoot: true
  seccompProfile:
    type: Unconfined
containers:
- name: c
  image: nginx` + restrictedOK,
			wantFailed: []string{"seccompProfile_baseline", "seccompProfile_restricted"},
		},
		"privileged level allows anything": {
			level: "privileged", spec: `
hostPID: true
containers:
- name: c
  image: nginx
  securityContext:
    privileged: true`,
		},
		"sysctl allowed from v1.29 only": {
			level: "baseline", version: "v1.29", spec: `
securityContext:
  sysctls:
  - name: net.ipv4.tcp_keepalive_time
    value: "60"
containers:
- name: c
  image: nginx`,
		},
		"sysctl forbidden at v1.24": {
			level: "baseline", version: "v1.24", spec: `
securityContext:
  sysctls:
  - name: net.ipv4.tcp_keepalive_time
    value: "60"
containers:
- name: c
  image: nginx`,
			wantFailed: []string{"sysctls"},
		},
		"selinux container_engine_t allowed at latest": {
			level: "baseline", spec: `
containers:
- name: c
  image: nginx
  securityContext:
    seLinuxOptions:
      type: container_engine_t`,
		},
		"selinux container_engine_t forbidden at v1.30": {
			level: "baseline", version: "v1.30", spec: `
containers:
- name: c
  image: nginx
  securityContext:
    seLinuxOptions:
      type: container_engine_t`,
			wantFailed: []string{"seLinuxOptions"},
		},
		"probe host forbidden at latest": {
			level: "baseline", spec: `
containers:
- name: c
  image: nginx
  livenessProbe:
    httpGet:
      host: 10.0.0.1
      port: 80`,
			wantFailed: []string{"hostProbesAndHostLifecycle"},
		},
		"probe host not checked before v1.34": {
			level: "baseline", version: "v1.33", spec: `
containers:
- name: c
  image: nginx
  livenessProbe:
    httpGet:
      host: 10.0.0.1
      port: 80`,
		},
		"apparmor annotation": {
			level: "baseline", spec: `
containers:
- name: c
  image: nginx`,
			annotations: []string{"container.apparmor.security.beta.kubernetes.io/c", "unconfined"},
			wantFailed:  []string{"appArmorProfile"},
		},
		"seccomp annotation only checked before v1.19": {
			level: "baseline", version: "v1.18", spec: `
containers:
- name: c
  image: nginx`,
			annotations: []string{"seccomp.security.alpha.kubernetes.io/pod", "unconfined"},
			wantFailed:  []string{"seccompProfile_baseline"},
		},
		"windows pod skips linux-only restricted checks": {
			level: "restricted", spec: `
os:
  name: windows
securityContext:
  runAsNonRoot: true
containers:
- name: c
  image: mcr.microsoft.com/windows/nanoserver`,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res, err := Check(tc.level, tc.version, nil, pod(t, tc.spec, tc.annotations...))
			if err != nil {
				t.Fatal(err)
			}
			if got := ids(res); !reflect.DeepEqual(got, tc.wantFailed) {
				t.Fatalf("failed checks %v, want %v\n%s", got, tc.wantFailed, FormatChecks(res.Failed, "Pod"))
			}
			if res.Allowed != (tc.wantFailed == nil) {
				t.Fatalf("Allowed = %v with failures %v", res.Allowed, ids(res))
			}
			for _, c := range res.Failed {
				if len(c.Errors) == 0 {
					t.Errorf("check %s failed without field errors", c.ID)
				}
				if c.Reason == "" || c.Control == "" {
					t.Errorf("check %s: empty reason or control: %+v", c.ID, c)
				}
			}
		})
	}
}

func TestCheckExclusions(t *testing.T) {
	// A restricted pod whose only fault is the one each case adds.
	tests := map[string]struct {
		level    string
		spec     string
		excludes []Exclude
		allowed  bool
	}{
		"control with matching image": {
			level: "restricted", spec: podSecure + `
containers:
- name: c
  image: ghcr.io/kyverno/test-nginx:1.1
  securityContext:
    allowPrivilegeEscalation: false
    capabilities:
      add: [SYS_ADMIN]
      drop: [ALL]`,
			excludes: []Exclude{{ControlName: "Capabilities", Images: []string{"ghcr.io/kyverno/test-nginx*"}}},
			allowed:  true,
		},
		"control with other image": {
			level: "restricted", spec: podSecure + `
containers:
- name: c
  image: busybox:1.28
  securityContext:
    allowPrivilegeEscalation: false
    capabilities:
      add: [SYS_ADMIN]
      drop: [ALL]`,
			excludes: []Exclude{{ControlName: "Capabilities", Images: []string{"ghcr.io/kyverno/test-nginx*", "redis*"}}},
			allowed:  false,
		},
		"image exclusion covers only the matching container": {
			level: "baseline", spec: `
containers:
- name: a
  image: nginx
  securityContext:
    privileged: true
- name: b
  image: busybox
  securityContext:
    privileged: true`,
			excludes: []Exclude{{ControlName: "Privileged Containers", Images: []string{"nginx"}}},
			allowed:  false,
		},
		"image exclusion does not cover pod-level fields": {
			level: "baseline", spec: `
securityContext:
  seLinuxOptions:
    type: spc_t
containers:
- name: c
  image: nginx
  securityContext:
    seLinuxOptions:
      type: spc_t`,
			excludes: []Exclude{{ControlName: "SELinux", Images: []string{"nginx"}}},
			allowed:  false,
		},
		"pod and image exclusions together": {
			level: "baseline", spec: `
securityContext:
  seLinuxOptions:
    type: spc_t
containers:
- name: c
  image: nginx
  securityContext:
    seLinuxOptions:
      type: spc_t`,
			excludes: []Exclude{{ControlName: "SELinux"}, {ControlName: "SELinux", Images: []string{"nginx"}}},
			allowed:  true,
		},
		"pod-level exclusion of host namespaces": {
			level: "baseline", spec: `
hostNetwork: true
hostIPC: true
containers:
- name: c
  image: nginx`,
			excludes: []Exclude{{ControlName: "Host Namespaces"}},
			allowed:  true,
		},
		"exclusion of another control": {
			level: "baseline", spec: `
hostNetwork: true
containers:
- name: c
  image: nginx`,
			excludes: []Exclude{{ControlName: "HostPath Volumes"}},
			allowed:  false,
		},
		"unknown control name is ignored": {
			level: "baseline", spec: `
hostNetwork: true
containers:
- name: c
  image: nginx`,
			excludes: []Exclude{{ControlName: "Host Network"}},
			allowed:  false,
		},
		"restricted field and values all listed": {
			level: "baseline", spec: `
containers:
- name: c
  image: nginx
  securityContext:
    capabilities:
      add: [FOO, BAR]`,
			excludes: []Exclude{{ControlName: "Capabilities", Images: []string{"nginx"},
				RestrictedField: "spec.containers[*].securityContext.capabilities.add", Values: []string{"FOO", "BAR"}}},
			allowed: true,
		},
		"restricted field with a value not listed": {
			level: "baseline", spec: `
containers:
- name: c
  image: nginx
  securityContext:
    capabilities:
      add: [FOO, BAR]`,
			excludes: []Exclude{{ControlName: "Capabilities", Images: []string{"nginx"},
				RestrictedField: "spec.containers[*].securityContext.capabilities.add", Values: []string{"FOO"}}},
			allowed: false,
		},
		"restricted field of another container kind": {
			level: "baseline", spec: `
initContainers:
- name: c
  image: nginx
  securityContext:
    privileged: true
containers:
- name: c
  image: nginx`,
			excludes: []Exclude{{ControlName: "Privileged Containers", Images: []string{"nginx"},
				RestrictedField: "spec.containers[*].securityContext.privileged", Values: []string{"true"}}},
			allowed: false,
		},
		"values are wildcard patterns": {
			level: "baseline", spec: `
containers:
- name: c
  image: nginx
volumes:
- name: v
  hostPath:
    path: /var/log/pods`,
			excludes: []Exclude{{ControlName: "HostPath Volumes", RestrictedField: "spec.volumes[*].hostPath", Values: []string{"/var/log/*"}}},
			allowed:  true,
		},
		"host path value not listed": {
			level: "baseline", spec: `
containers:
- name: c
  image: nginx
volumes:
- name: v
  hostPath:
    path: /etc`,
			excludes: []Exclude{{ControlName: "HostPath Volumes", RestrictedField: "spec.volumes[*].hostPath", Values: []string{"/var/log/*"}}},
			allowed:  false,
		},
		"host ports values": {
			level: "baseline", spec: `
containers:
- name: c
  image: nginx
  ports:
  - containerPort: 10
    hostPort: 10
  - containerPort: 20
    hostPort: 20`,
			excludes: []Exclude{{ControlName: "Host Ports", Images: []string{"nginx"},
				RestrictedField: "spec.containers[*].ports[*].hostPort", Values: []string{"10", "20"}}},
			allowed: true,
		},
		"host ports one value missing": {
			level: "baseline", spec: `
containers:
- name: c
  image: nginx
  ports:
  - containerPort: 10
    hostPort: 10
  - containerPort: 20
    hostPort: 20`,
			excludes: []Exclude{{ControlName: "Host Ports", Images: []string{"nginx"},
				RestrictedField: "spec.containers[*].ports[*].hostPort", Values: []string{"10"}}},
			allowed: false,
		},
		"run as user value": {
			level: "restricted", spec: `
securityContext:
  runAsUser: 0
  runAsNonRoot: true
  seccompProfile:
    type: RuntimeDefault
containers:
- name: c
  image: nginx` + restrictedOK,
			excludes: []Exclude{{ControlName: "Running as Non-root user", RestrictedField: "spec.securityContext.runAsUser", Values: []string{"0"}}},
			allowed:  true,
		},
		"run as user other value": {
			level: "restricted", spec: `
securityContext:
  runAsUser: 0
  runAsNonRoot: true
  seccompProfile:
    type: RuntimeDefault
containers:
- name: c
  image: nginx` + restrictedOK,
			excludes: []Exclude{{ControlName: "Running as Non-root user", RestrictedField: "spec.securityContext.runAsUser", Values: []string{"1"}}},
			allowed:  false,
		},
		"apparmor annotation by key": {
			level: "baseline", spec: `
containers:
- name: c
  image: nginx`,
			excludes: []Exclude{{ControlName: "AppArmor",
				RestrictedField: "metadata.annotations[container.apparmor.security.beta.kubernetes.io/c]", Values: []string{"unconfined"}}},
			allowed: true,
		},
		// Kyverno evaluates a pod-level exclusion on the pod with one empty
		// container, whose missing fields then exempt the same missing
		// field of one real container.
		"pod-level exclusion also exempts one container's missing field": {
			level: "restricted", spec: `
securityContext:
  runAsUser: 0
  runAsNonRoot: true
  seccompProfile:
    type: RuntimeDefault
containers:
- name: c
  image: nginx`,
			excludes: []Exclude{{ControlName: "Running as Non-root user"}, {ControlName: "Privilege Escalation"}, {ControlName: "Capabilities"}},
			allowed:  true,
		},
		"pod-level exclusion exempts one container only": {
			level: "restricted", spec: podSecure + `
containers:
- name: a
  image: nginx
  securityContext:
    capabilities:
      drop: [ALL]
- name: b
  image: nginx
  securityContext:
    capabilities:
      drop: [ALL]`,
			excludes: []Exclude{{ControlName: "Privilege Escalation"}},
			allowed:  false,
		},
		"pod-level exclusion does not exempt explicit container values": {
			level: "restricted", spec: podSecure + `
containers:
- name: c
  image: nginx
  securityContext:
    runAsNonRoot: false
    allowPrivilegeEscalation: false
    capabilities:
      drop: [ALL]`,
			excludes: []Exclude{{ControlName: "Running as Non-root"}},
			allowed:  false,
		},
		"pod-level runAsNonRoot false with unset container": {
			level: "restricted", spec: `
securityContext:
  runAsNonRoot: false
  seccompProfile:
    type: RuntimeDefault
containers:
- name: c
  image: nginx` + restrictedOK,
			excludes: []Exclude{{ControlName: "Running as Non-root"}},
			allowed:  true,
		},
		"container-level exclusion with pod-level setting": {
			level: "restricted", spec: podSecure + `
containers:
- name: c
  image: nginx
  securityContext:
    runAsNonRoot: false
    allowPrivilegeEscalation: false
    capabilities:
      drop: [ALL]`,
			excludes: []Exclude{{ControlName: "Running as Non-root", Images: []string{"nginx"}}},
			allowed:  true,
		},
		"container-level exclusion leaves init containers": {
			level: "restricted", spec: `
securityContext:
  runAsNonRoot: false
  seccompProfile:
    type: RuntimeDefault
initContainers:
- name: x
  image: nginx
  securityContext:
    runAsNonRoot: false
    allowPrivilegeEscalation: false
    capabilities:
      drop: [ALL]
ephemeralContainers:
- name: x
  image: nginx
  securityContext:
    runAsNonRoot: false
    allowPrivilegeEscalation: false
    capabilities:
      drop: [ALL]`,
			excludes: []Exclude{
				{ControlName: "Running as Non-root", Images: []string{"nginx"},
					RestrictedField: "spec.ephemeralContainers[*].securityContext.runAsNonRoot", Values: []string{"false"}},
				{ControlName: "Running as Non-root", RestrictedField: "spec.securityContext.runAsNonRoot", Values: []string{"false"}},
			},
			allowed: false,
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			res, err := Check(tc.level, "latest", tc.excludes, pod(t, tc.spec))
			if err != nil {
				t.Fatal(err)
			}
			if res.Allowed != tc.allowed {
				t.Fatalf("Allowed = %v, want %v; failed: %s", res.Allowed, tc.allowed, FormatChecks(res.Failed, "Pod"))
			}
		})
	}
}

func TestMessage(t *testing.T) {
	p := pod(t, `
containers:
- name: c
  image: nginx
  securityContext:
    privileged: true
volumes:
- name: v
  hostPath:
    path: /data`)
	res, err := Check("baseline", "v1.29", nil, p)
	if err != nil {
		t.Fatal(err)
	}
	want := `Validation rule 'baseline' failed. It violates PodSecurity "baseline:v1.29": ` +
		`(Forbidden reason: hostPath volumes, field error list: [spec.volumes[0].hostPath is forbidden, forbidden values found: /data])` +
		`(Forbidden reason: privileged, field error list: [spec.containers[0].securityContext.privileged is forbidden, forbidden values found: true])`
	if got := res.Message("baseline", "baseline", "v1.29", "Pod"); got != want {
		t.Fatalf("message\n got %s\nwant %s", got, want)
	}
	if got := (Result{Allowed: true}).Message("r", "baseline", "latest", "Pod"); got != "Validation rule 'r' passed." {
		t.Fatalf("pass message %q", got)
	}

	res, err = Check("restricted", "latest", nil, pod(t, `
containers:
- name: c
  image: nginx`))
	if err != nil {
		t.Fatal(err)
	}
	msg := FormatChecks(res.Failed, "Deployment")
	for _, part := range []string{
		"(Forbidden reason: allowPrivilegeEscalation != false, field error list: [spec.template.spec.containers[0].securityContext.allowPrivilegeEscalation: Required value])",
		"(Forbidden reason: unrestricted capabilities, field error list: [spec.template.spec.containers[0].securityContext.capabilities.drop: Required value])",
		"(Forbidden reason: runAsNonRoot != true, field error list: [spec.template.spec.containers[0].securityContext.runAsNonRoot: Required value])",
		"(Forbidden reason: seccompProfile, field error list: [spec.template.spec.containers[0].securityContext.seccompProfile.type: Required value])",
	} {
		if !strings.Contains(msg, part) {
			t.Errorf("message lacks %q:\n%s", part, msg)
		}
	}
	if d := res.Failed[0].Detail; d != `container "c" must set securityContext.allowPrivilegeEscalation=false` {
		t.Errorf("detail %q", d)
	}
}

func TestCheckErrors(t *testing.T) {
	good := map[string]any{"metadata": map[string]any{"name": "p"}, "spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": "i"}}}}
	tests := map[string]struct {
		level, version string
		pod            map[string]any
		want           error
	}{
		"bad level":         {"strict", "latest", good, ErrInvalidLevel},
		"capitalised level": {"Baseline", "latest", good, ErrInvalidLevel},
		"bad version":       {"baseline", "1.29", good, ErrInvalidVersion},
		"v2 version":        {"baseline", "v2.0", good, ErrInvalidVersion},
		"wrong field type": {"baseline", "latest", map[string]any{"spec": map[string]any{
			"containers": []any{map[string]any{"name": "c", "securityContext": map[string]any{"privileged": "yes"}}}}}, ErrInvalidPod},
		"containers not a list": {"restricted", "latest", map[string]any{"spec": map[string]any{"containers": "c"}}, ErrInvalidPod},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if _, err := Check(tc.level, tc.version, nil, tc.pod); !errors.Is(err, tc.want) {
				t.Fatalf("error %v, want %v", err, tc.want)
			}
		})
	}
	// An empty document is a pod with nothing to object to.
	if res, err := Check("restricted", "", nil, map[string]any{}); err != nil || !res.Allowed {
		t.Fatalf("empty pod: %+v, %v", res, err)
	}
}

func TestPodFromResource(t *testing.T) {
	tmpl := map[string]any{"metadata": map[string]any{"labels": map[string]any{"a": "b"}}, "spec": map[string]any{"hostPID": true}}
	tests := map[string]struct {
		kind     string
		resource map[string]any
		wantSpec bool
		err      error
	}{
		"pod":         {"Pod", map[string]any{"spec": map[string]any{"hostPID": true}}, true, nil},
		"deployment":  {"Deployment", map[string]any{"spec": map[string]any{"template": tmpl}}, true, nil},
		"cronjob":     {"CronJob", map[string]any{"spec": map[string]any{"jobTemplate": map[string]any{"spec": map[string]any{"template": tmpl}}}}, true, nil},
		"no template": {"StatefulSet", map[string]any{"spec": map[string]any{}}, false, nil},
		"service":     {"Service", map[string]any{}, false, ErrUnsupportedKind},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := PodFromResource(tc.kind, tc.resource)
			if !errors.Is(err, tc.err) {
				t.Fatalf("error %v, want %v", err, tc.err)
			}
			if err != nil {
				return
			}
			res, err := Check("baseline", "latest", nil, got)
			if err != nil {
				t.Fatal(err)
			}
			if res.Allowed == tc.wantSpec {
				t.Fatalf("hostPID pod allowed=%v", res.Allowed)
			}
		})
	}
}

func TestValidControl(t *testing.T) {
	for name, want := range map[string]bool{
		"Capabilities": true, "Running as Non-root user": true, "/proc Mount Type": true,
		"Host Probes / Lifecycle Hooks": true, "capabilities": false, "": false,
	} {
		if got := ValidControl(name); got != want {
			t.Errorf("ValidControl(%q) = %v, want %v", name, got, want)
		}
	}
}

// TestStarDigits checks starDigits against the regular expression it
// replaces.
func TestStarDigits(t *testing.T) {
	for _, s := range []string{"", "a", "1", "spec.containers[0].securityContext", "spec.containers[12].ports[3]", "a1b22c333", "99", "x9", "9x", "é1ü"} {
		if got, want := starDigits(s), indexRe.ReplaceAllString(s, "*"); got != want {
			t.Errorf("starDigits(%q) = %q, want %q", s, got, want)
		}
	}
}

// TestWriteValue checks writeValue against the fmt verb it stands for.
func TestWriteValue(t *testing.T) {
	values := map[string]any{
		"string":       "Unconfined",
		"empty string": "",
		"true":         true,
		"false":        false,
		"int":          8080,
		"negative int": -1,
		"zero":         0,
		"strings":      []string{"NET_ADMIN", "SYS_TIME"},
		"one string":   []string{"ALL"},
		"no strings":   []string{},
		"other":        int32(3),
	}
	for name, v := range values {
		t.Run(name, func(t *testing.T) {
			var b strings.Builder
			writeValue(&b, v)
			if want := fmt.Sprintf("%+v", v); b.String() != want {
				t.Fatalf("writeValue(%#v) = %q, want %q", v, b.String(), want)
			}
		})
	}
}
