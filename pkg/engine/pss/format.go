package pss

import (
	"fmt"
	"strconv"
	"strings"
)

// Message is the rule message Kyverno writes for a podSecurity rule: on
// success "Validation rule 'NAME' passed.", on failure
//
//	Validation rule 'NAME' failed. It violates PodSecurity "LEVEL:VERSION": (Forbidden reason: REASON, field error list: [ERRORS])...
//
// with level and version as written in the policy. kind is the kind of the
// evaluated resource: for pod controllers Kyverno reports the fields under
// the pod template, and it rewrites "metadata" into "spec.template.metadata"
// for every kind.
func (r Result) Message(rule, level, version, kind string) string {
	if r.Allowed {
		return "Validation rule '" + rule + "' passed."
	}
	var b strings.Builder
	b.Grow(64 + len(rule) + len(level) + len(version) + checksSize(r.Failed))
	b.WriteString("Validation rule '")
	b.WriteString(rule)
	b.WriteString(`' failed. It violates PodSecurity "`)
	b.WriteString(level)
	b.WriteByte(':')
	b.WriteString(version)
	b.WriteString(`": `)
	writeChecks(&b, r.Failed, kind)
	return b.String()
}

// FormatChecks renders failed checks as Kyverno does in rule messages, one
// "(Forbidden reason: ..., field error list: [...])" group per check.
func FormatChecks(checks []CheckResult, kind string) string {
	var b strings.Builder
	b.Grow(checksSize(checks))
	writeChecks(&b, checks, kind)
	return b.String()
}

// checksSize estimates the length of the text of checks, so that it is
// written with one allocation most of the time.
func checksSize(checks []CheckResult) int {
	n := 0
	for _, c := range checks {
		n += 40 + len(c.Reason)
		for _, e := range c.Errors {
			// The field may be rewritten for a pod controller (see
			// reportedField), and a forbidden value is written out.
			n += 64 + 2*len(e.Field)
			switch v := e.BadValue.(type) {
			case string:
				n += len(v)
			case []string:
				for _, s := range v {
					n += len(s) + 1
				}
			}
		}
	}
	return n
}

func writeChecks(b *strings.Builder, checks []CheckResult, kind string) {
	for _, c := range checks {
		b.WriteString("(Forbidden reason: ")
		b.WriteString(c.Reason)
		b.WriteString(", field error list: [")
		for i, e := range c.Errors {
			if i > 0 {
				b.WriteString(", ")
			}
			field := reportedField(e.Field, kind)
			if e.Type == Forbidden && hasValue(e.BadValue) {
				b.WriteString(field)
				b.WriteString(" is forbidden, forbidden values found: ")
				writeValue(b, e.BadValue)
				continue
			}
			b.WriteString(field)
			if e.Type == Required {
				b.WriteString(": Required value")
			} else {
				b.WriteString(": Forbidden")
			}
		}
		b.WriteString("])")
	}
}

// writeValue writes v as fmt's %+v verb does.
func writeValue(b *strings.Builder, v any) {
	switch t := v.(type) {
	case string:
		b.WriteString(t)
	case bool:
		b.WriteString(strconv.FormatBool(t))
	case int:
		b.WriteString(strconv.Itoa(t))
	case []string:
		b.WriteByte('[')
		for i, s := range t {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString(s)
		}
		b.WriteByte(']')
	default:
		fmt.Fprintf(b, "%+v", v)
	}
}

func hasValue(v any) bool {
	if v == nil {
		return false
	}
	s, isString := v.(string)
	return !isString || s != ""
}

// reportedField rewrites a pod field path the way Kyverno does for reports
// and messages (plain string replacement, as Kyverno does it).
func reportedField(field, kind string) string {
	switch kind {
	case "DaemonSet", "Deployment", "Job", "StatefulSet", "ReplicaSet", "ReplicationController":
		field = strings.ReplaceAll(field, "spec", "spec.template.spec")
	case "CronJob":
		field = strings.ReplaceAll(field, "spec", "spec.jobTemplate.spec.template.spec")
	}
	return strings.ReplaceAll(field, "metadata", "spec.template.metadata")
}
