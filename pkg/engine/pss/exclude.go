package pss

import (
	"regexp"
	"strconv"
	"strings"

	"github.com/verdict-dev/verdict/pkg/engine/wildcard"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

var (
	indexRe = regexp.MustCompile(`\d+`)
	wordRe  = regexp.MustCompile(`[a-zA-Z]+`)
)

// exclude removes from failed the field errors the exclusions cover and drops
// the checks left with none, following Kyverno:
//
//   - Without images, an exclusion evaluates the control on a copy of the pod
//     whose containers are replaced by one empty container named "fake"; each
//     field error found there removes one error on the same field (indexes
//     ignored) from the pod's result. This exempts the pod-level fields; it
//     also exempts one container-level error per field when the empty
//     container fails too, as in Kyverno.
//   - With images, it evaluates the control on a pod holding only the
//     containers whose image matches, with no pod-level settings; each field
//     error found there removes the error on the same field of the same
//     container (by name) from the pod's result.
//
// A field error is used only when its field, indexes turned into `*`, equals
// RestrictedField (or RestrictedField is empty) and, when Values is set,
// every offending value matches one of Values.
//
// The wildcards of Images and Values are charged to m, when set, before
// each is matched (see Meter): an error is why the check must stop.
func (p *Profile) exclude(pod *corev1.Pod, excludes []Exclude, failed []CheckResult, m Meter) ([]CheckResult, error) {
	for _, ex := range excludes {
		ids := controlChecks[ex.ControlName]
		if len(ids) == 0 {
			continue
		}
		containerLevel := len(ex.Images) > 0
		var sub *corev1.Pod // built on first use
		for _, id := range ids {
			target := indexOf(failed, id)
			if target < 0 {
				continue // nothing to exempt
			}
			run, ok := p.byID[id]
			if !ok {
				continue
			}
			if sub == nil {
				var err error
				if sub, err = excludedPod(pod, ex.Images, m); err != nil {
					return nil, err
				}
			}
			if run(&sub.ObjectMeta, &sub.Spec).Allowed {
				continue
			}
			matched := false
			for _, exErr := range fieldErrors(id, p.version, &sub.ObjectMeta, &sub.Spec) {
				field, name, _ := locate(exErr.Field, sub, containerLevel)
				if ex.RestrictedField != "" && field != ex.RestrictedField {
					continue
				}
				exempted, err := valuesExempted(ex.Values, exErr.BadValue, m)
				if err != nil {
					return nil, err
				}
				if !exempted {
					continue
				}
				matched = true
				errs := failed[target].Errors
				for i, e := range errs {
					dField, dName, dContainer := locate(e.Field, pod, containerLevel)
					if dField != field || (dContainer && dName != name) {
						continue
					}
					failed[target].Errors = append(errs[:i:i], errs[i+1:]...)
					break
				}
			}
			if matched && len(failed[target].Errors) == 0 {
				failed = append(failed[:target:target], failed[target+1:]...)
			}
		}
	}
	return failed, nil
}

// Meter is charged with the work of matching the wildcards of
// exclusions, in units of about one byte compared (wildcard.Cost), so
// that a long pattern against a long image or value takes only what the
// caller allows.
type Meter interface {
	// ChargeWork counts n units of work and returns why the check must
	// stop, if it must.
	ChargeWork(n int64) error
}

// matchAny reports whether s matches one of patterns, each match charged
// to m first.
func matchAny(patterns []string, s string, m Meter) (bool, error) {
	for _, p := range patterns {
		if m != nil {
			if err := m.ChargeWork(wildcard.Cost(p, len(s))); err != nil {
				return false, err
			}
		}
		if wildcard.Match(p, s) {
			return true, nil
		}
	}
	return false, nil
}

func indexOf(failed []CheckResult, id string) int {
	for i := range failed {
		if failed[i].ID == id {
			return i
		}
	}
	return -1
}

// excludedPod builds the pod an exclusion is evaluated on (see exclude),
// the images matched charged to m.
func excludedPod(pod *corev1.Pod, images []string, m Meter) (*corev1.Pod, error) {
	if len(images) == 0 {
		sub := &corev1.Pod{ObjectMeta: pod.ObjectMeta, Spec: pod.Spec}
		sub.Spec.Containers = []corev1.Container{{Name: "fake"}}
		sub.Spec.InitContainers = nil
		sub.Spec.EphemeralContainers = nil
		return sub, nil
	}
	sub := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: pod.Name, Namespace: pod.Namespace}}
	for _, c := range pod.Spec.Containers {
		if ok, err := matchAny(images, c.Image, m); err != nil {
			return nil, err
		} else if ok {
			sub.Spec.Containers = append(sub.Spec.Containers, c)
		}
	}
	for _, c := range pod.Spec.InitContainers {
		if ok, err := matchAny(images, c.Image, m); err != nil {
			return nil, err
		} else if ok {
			sub.Spec.InitContainers = append(sub.Spec.InitContainers, c)
		}
	}
	for _, c := range pod.Spec.EphemeralContainers {
		if ok, err := matchAny(images, c.Image, m); err != nil {
			return nil, err
		} else if ok {
			sub.Spec.EphemeralContainers = append(sub.Spec.EphemeralContainers, c)
		}
	}
	return sub, nil
}

// locate turns a field path into its index-free form ("spec.containers[*].
// securityContext.privileged") and, for container-level exclusions, into the
// name of the container it belongs to (container reports whether it does).
// Like Kyverno it replaces every run of digits, inside map keys too.
func locate(field string, pod *corev1.Pod, containerLevel bool) (pattern, name string, container bool) {
	pattern = starDigits(field)
	if !containerLevel {
		return pattern, "", false
	}
	words := wordRe.FindAllString(field, 2)
	if len(words) < 2 {
		return pattern, "", false
	}
	kind := words[1]
	if kind != "containers" && kind != "initContainers" && kind != "ephemeralContainers" {
		return pattern, "", false
	}
	idx, err := strconv.Atoi(indexRe.FindString(field))
	if err != nil {
		return pattern, "", true
	}
	return pattern, containerName(pod, kind, idx), true
}

// starDigits replaces every run of ASCII digits in s with "*", as
// indexRe.ReplaceAllString(s, "*") does, without a regular expression (it
// runs for every field of every finding).
func starDigits(s string) string {
	i := strings.IndexAny(s, "0123456789")
	if i < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s))
	b.WriteString(s[:i])
	for i < len(s) {
		if c := s[i]; c < '0' || c > '9' {
			b.WriteByte(c)
			i++
			continue
		}
		b.WriteByte('*')
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
	}
	return b.String()
}

func containerName(pod *corev1.Pod, kind string, i int) string {
	switch kind {
	case "containers":
		if i < len(pod.Spec.Containers) {
			return pod.Spec.Containers[i].Name
		}
	case "initContainers":
		if i < len(pod.Spec.InitContainers) {
			return pod.Spec.InitContainers[i].Name
		}
	case "ephemeralContainers":
		if i < len(pod.Spec.EphemeralContainers) {
			return pod.Spec.EphemeralContainers[i].Name
		}
	}
	return ""
}

// valuesExempted reports whether every offending value of a field error
// matches one of the exclusion's value patterns. No patterns, or no value
// (a missing field), exempts. The matches are charged to m.
func valuesExempted(patterns []string, bad any, m Meter) (bool, error) {
	if len(patterns) == 0 {
		return true, nil
	}
	for _, v := range badValues(bad) {
		if ok, err := matchAny(patterns, v, m); !ok || err != nil {
			return false, err
		}
	}
	return true, nil
}

// badValues turns a field error's offending value into the strings values
// are matched against.
func badValues(bad any) []string {
	switch v := bad.(type) {
	case string:
		if v == "" {
			return nil
		}
		return []string{v}
	case bool:
		return []string{strconv.FormatBool(v)}
	case int:
		return []string{strconv.Itoa(v)}
	case []string:
		return v
	}
	return nil
}
