// Package pss evaluates Kyverno's validate.podSecurity rules: a Pod Security
// Standards profile (level and version) checked with
// k8s.io/pod-security-admission, minus the exclusions the policy grants.
//
// The checks themselves are the upstream ones. Kyverno's extensions are
// reproduced here: exclusions by control name, optionally limited to
// container images, to one restricted field and to a set of values; the
// field-level detail of each failed check; and the rule message.
package pss

import (
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/pod-security-admission/api"
	"k8s.io/pod-security-admission/policy"
)

// Errors returned (wrapped) by NewProfile and Check.
var (
	ErrInvalidLevel   = errors.New("invalid pod security level")
	ErrInvalidVersion = errors.New("invalid pod security version")
	ErrInvalidPod     = errors.New("invalid pod")
)

// Exclude is one entry of a podSecurity rule's exclude list.
type Exclude struct {
	// ControlName is the Pod Security Standards control, as Kyverno names it
	// ("Capabilities", "Running as Non-root", "HostPath Volumes", ...).
	ControlName string `json:"controlName"`
	// Images limits the exclusion to containers whose image matches one of
	// these wildcard patterns. When empty, only the pod-level fields of the
	// control are excluded.
	Images []string `json:"images,omitempty"`
	// RestrictedField limits the exclusion to one field of the control, with
	// `*` for indexes ("spec.containers[*].securityContext.capabilities.add").
	// Empty means every field of the control.
	RestrictedField string `json:"restrictedField,omitempty"`
	// Values limits the exclusion to offending values that all match one of
	// these wildcard patterns. Empty means any value.
	Values []string `json:"values,omitempty"`
}

// ErrorType is the kind of a field error.
type ErrorType string

const (
	// Forbidden: the field is set to a value the profile does not allow.
	Forbidden ErrorType = "Forbidden"
	// Required: the field must be set and is not.
	Required ErrorType = "Required"
)

// FieldError names one offending field of a failed check.
type FieldError struct {
	// Field is the path of the field in the pod, with list indexes
	// ("spec.containers[0].securityContext.privileged").
	Field string
	Type  ErrorType
	// BadValue is the offending value: a bool, int, string or []string, or
	// nil when the field is missing or its presence alone is the problem.
	BadValue any
}

// CheckResult is one failed Pod Security Standards check.
type CheckResult struct {
	// ID is the pod-security-admission check ID ("privileged",
	// "runAsNonRoot", "capabilities_restricted", ...).
	ID string
	// Control is the control name the check belongs to, as used in
	// exclusions ("Privileged Containers", "Capabilities", ...).
	Control string
	// Reason and Detail are pod-security-admission's ForbiddenReason and
	// ForbiddenDetail ("privileged", `container "c" must not set
	// securityContext.privileged=true`).
	Reason string
	Detail string
	// Errors lists the offending fields.
	Errors []FieldError
}

// Result is the outcome of Check.
type Result struct {
	Allowed bool
	// Failed holds the checks that failed and were not excluded, in
	// pod-security-admission's check order.
	Failed []CheckResult
}

// controlChecks maps a control name to the IDs of its checks. It follows
// Kyverno's table; procMount_restricted (new in pod-security-admission 1.35)
// is added to "/proc Mount Type".
var controlChecks = map[string][]string{
	"Capabilities":                  {"capabilities_baseline", "capabilities_restricted"},
	"Seccomp":                       {"seccompProfile_baseline", "seccompProfile_restricted"},
	"Privileged Containers":         {"privileged"},
	"Host Ports":                    {"hostPorts"},
	"/proc Mount Type":              {"procMount", "procMount_restricted"},
	"Host Probes / Lifecycle Hooks": {"hostProbesAndHostLifecycle"},
	"HostProcess":                   {"windowsHostProcess"},
	"SELinux":                       {"seLinuxOptions"},
	"Host Namespaces":               {"hostNamespaces"},
	"HostPath Volumes":              {"hostPathVolumes"},
	"Sysctls":                       {"sysctls"},
	"AppArmor":                      {"appArmorProfile"},
	"Privilege Escalation":          {"allowPrivilegeEscalation"},
	"Running as Non-root":           {"runAsNonRoot"},
	"Running as Non-root user":      {"runAsUser"},
	"Volume Types":                  {"restrictedVolumes"},
}

var checkControl = func() map[string]string {
	m := make(map[string]string)
	for name, ids := range controlChecks {
		for _, id := range ids {
			m[id] = name
		}
	}
	return m
}()

// ValidControl reports whether name is a control name an exclusion may use.
func ValidControl(name string) bool {
	_, ok := controlChecks[name]
	return ok
}

// Profile is a parsed level and version with the checks that apply to
// it. Build one with NewProfile, once per podSecurity rule, and check
// every pod with it; a Profile is safe for concurrent use.
type Profile struct {
	level   api.Level
	version api.Version
	checks  []selectedCheck
	byID    map[string]policy.CheckPodFn
}

type selectedCheck struct {
	id  string
	run policy.CheckPodFn
	// minVersion is the version of the check revision in use: together
	// with id it names the function.
	minVersion api.Version
	// slot numbers the revision (id and minVersion) among all the
	// revisions of pod-security-admission's checks: its place in a Memo.
	slot int
}

// revisionSlots numbers every revision of every default check, so that a
// Memo is a slice indexed by revision rather than a map.
var revisionSlots = func() map[memoKey]int {
	m := make(map[memoKey]int)
	for _, c := range policy.DefaultChecks() {
		for _, vc := range c.Versions {
			k := memoKey{id: string(c.ID), version: vc.MinimumVersion}
			if _, ok := m[k]; !ok {
				m[k] = len(m)
			}
		}
	}
	return m
}()

// NewProfile parses level ("privileged", "baseline" or "restricted") and
// version ("latest", "" for latest, or "v1.x") and selects, for every
// check of the level, its newest revision not newer than the version.
// Kyverno evaluates the baseline checks for "baseline" and every check,
// restricted ones included, for "restricted", without
// pod-security-admission's overrides; so does this. Errors wrap
// ErrInvalidLevel or ErrInvalidVersion.
func NewProfile(level, version string) (*Profile, error) {
	lvl, err := api.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("%w %q: %w", ErrInvalidLevel, level, err)
	}
	ver := api.LatestVersion()
	if version != "" && version != "latest" {
		v, err := api.ParseVersion(version)
		if err != nil {
			return nil, fmt.Errorf("%w %q: %w", ErrInvalidVersion, version, err)
		}
		ver = api.MajorMinorVersion(v.Major(), v.Minor())
	}
	p := &Profile{level: lvl, version: ver, byID: make(map[string]policy.CheckPodFn)}
	if lvl != api.LevelPrivileged {
		for _, c := range policy.DefaultChecks() {
			if lvl == api.LevelBaseline && c.Level != api.LevelBaseline {
				continue
			}
			var run policy.CheckPodFn
			var minVersion api.Version
			for _, vc := range c.Versions {
				if !ver.Older(vc.MinimumVersion) {
					run, minVersion = vc.CheckPod, vc.MinimumVersion
				}
			}
			if run == nil {
				continue // the check is newer than the version asked for
			}
			slot := revisionSlots[memoKey{id: string(c.ID), version: minVersion}]
			p.checks = append(p.checks, selectedCheck{id: string(c.ID), run: run, minVersion: minVersion, slot: slot})
			p.byID[string(c.ID)] = run
		}
	}
	return p, nil
}

// Check evaluates pod at the Pod Security Standards level ("privileged",
// "baseline" or "restricted") and version ("latest", "" for latest, or
// "v1.x"), then removes the failures the exclusions cover, as Kyverno's
// validate.podSecurity does. It parses the level and version on every
// call: to check many pods, use NewProfile once and Profile.Check.
func Check(level, version string, excludes []Exclude, pod map[string]any) (Result, error) {
	p, err := NewProfile(level, version)
	if err != nil {
		return Result{}, err
	}
	return p.Check(excludes, pod)
}

// Check evaluates pod at the profile, then removes the failures the
// exclusions cover, as Kyverno's validate.podSecurity does.
//
// pod is a Pod document (map[string]any) with at least metadata and spec;
// for a pod controller, pass the pod template (see PodFromResource). Only
// the fields the checks read are decoded (and type-checked); a field of the
// wrong type among them is an error wrapping ErrInvalidPod.
// "privileged" allows every pod.
func (p *Profile) Check(excludes []Exclude, pod map[string]any) (Result, error) {
	if len(p.checks) == 0 {
		return Result{Allowed: true}, nil
	}
	typed, err := ToPod(pod)
	if err != nil {
		return Result{}, err
	}
	res, _ := p.evaluate(typed, excludes, nil, nil)
	return res, nil
}

// CheckPod is Check for a pod already decoded with ToPod (or a complete Pod);
// callers that evaluate several rules on one pod decode it once.
func CheckPod(level, version string, excludes []Exclude, pod *corev1.Pod) (Result, error) {
	p, err := NewProfile(level, version)
	if err != nil {
		return Result{}, err
	}
	return p.CheckPod(excludes, pod, nil), nil
}

// Memo remembers check outcomes for one pod, so that several podSecurity
// rules on the same pod (restricted includes every baseline check) run
// each check once. A Memo belongs to one pod and one goroutine.
type Memo struct {
	pod *corev1.Pod
	// results holds the outcome of each check revision run so far, by
	// revision slot (see revisionSlots).
	results []memoResult
}

type memoResult struct {
	done bool
	r    policy.CheckResult
}

// memoKey names a check revision.
type memoKey struct {
	id      string
	version api.Version
}

// NewMemo returns a Memo for pod.
func NewMemo(pod *corev1.Pod) *Memo {
	return &Memo{pod: pod, results: make([]memoResult, len(revisionSlots))}
}

// CheckPod is Check for a pod already decoded with ToPod (or a complete
// Pod), with check outcomes shared through memo (nil for none). The memo
// must be for the same pod.
func (p *Profile) CheckPod(excludes []Exclude, pod *corev1.Pod, memo *Memo) Result {
	res, _ := p.CheckPodMetered(excludes, pod, memo, nil)
	return res
}

// CheckPodMetered is CheckPod with the wildcards of the exclusions
// charged to m (nil for none) before each is matched: a pattern and an
// image or value that would take long to compare take only what m
// allows. An error is m's reason to stop; the result is then empty.
func (p *Profile) CheckPodMetered(excludes []Exclude, pod *corev1.Pod, memo *Memo, m Meter) (Result, error) {
	if memo != nil && memo.pod != pod {
		memo = nil
	}
	return p.evaluate(pod, excludes, memo, m)
}

func (p *Profile) evaluate(pod *corev1.Pod, excludes []Exclude, memo *Memo, m Meter) (Result, error) {
	var failed []CheckResult
	for _, c := range p.checks {
		var r policy.CheckResult
		if memo != nil {
			m := &memo.results[c.slot]
			if !m.done {
				m.r, m.done = c.run(&pod.ObjectMeta, &pod.Spec), true
			}
			r = m.r
		} else {
			r = c.run(&pod.ObjectMeta, &pod.Spec)
		}
		if r.Allowed {
			continue
		}
		failed = append(failed, CheckResult{
			ID:      c.id,
			Control: checkControl[c.id],
			Reason:  r.ForbiddenReason,
			Detail:  r.ForbiddenDetail,
			Errors:  fieldErrors(c.id, p.version, &pod.ObjectMeta, &pod.Spec),
		})
	}
	if len(failed) > 0 && len(excludes) > 0 {
		var err error
		if failed, err = p.exclude(pod, excludes, failed, m); err != nil {
			return Result{}, err
		}
	}
	return Result{Allowed: len(failed) == 0, Failed: failed}, nil
}
