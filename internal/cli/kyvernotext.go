package cli

import (
	"bytes"
	"fmt"
	"io"

	"github.com/verdict-dev/verdict/pkg/engine"
)

// textWriter writes apply's results in the form of the Kyverno CLI's
// default output, which pipelines and Kyverno's own CLI suite read: a
// line saying how many rules are applied to how many resources (and
// with how many exceptions), the resources mutations changed (unless
// they go to a file), for each policy and resource with failed rules a
// block naming them, and the summary line. Everything is written at the
// end, when the number of resources is known.
type textWriter struct {
	w          io.Writer
	rules      int
	exceptions int
	resources  int
	// mutated holds the blocks of mutated resources; body the lines
	// about results.
	mutated, body bytes.Buffer
	// group is the policy and resource whose results come in, and the
	// rules of theirs that failed.
	group struct {
		policy, resource string
		audit            bool
		failed           []applyResult
	}
}

// setRun says what the header counts: the rules of the policies
// (autogen rules included; one a CEL or Kubernetes admission policy, one
// a cleanup policy) and the exceptions.
func (t *textWriter) setRun(set *engine.Set, deleting []*engine.CleanupPolicy, exceptions int) {
	for _, p := range set.Policies {
		t.rules += len(p.Rules)
	}
	t.rules += len(deleting)
	t.exceptions = exceptions
}

func (t *textWriter) add(r applyResult) error {
	res := r.resourcePath()
	if r.Policy != t.group.policy || res != t.group.resource {
		t.endGroup()
		t.group.policy, t.group.resource = r.Policy, res
	}
	switch {
	case r.ruleType == engine.TypeMutation && r.Result == string(engine.StatusSkip):
		fmt.Fprintf(&t.body, "\nskipped mutate policy %s -> resource %s\n", r.Policy, res)
	case r.ruleType == engine.TypeMutation && r.Result == string(engine.StatusError):
		fmt.Fprintf(&t.body, "\nerror while applying mutate policy %s -> resource %s\nerror: %s\n", r.Policy, res, oneLine(r.Message))
	case r.ruleType == engine.TypeGeneration && r.Result == string(engine.StatusError):
		fmt.Fprintf(&t.body, "\nerror while applying generate policy %s -> resource %s\nerror: %s\n", r.Policy, res, oneLine(r.Message))
	}
	if r.failed {
		t.group.failed = append(t.group.failed, r)
		t.group.audit = t.group.audit || r.auditWarned
	}
	return nil
}

// endGroup writes the block of the rules of the group that failed.
func (t *textWriter) endGroup() {
	if len(t.group.failed) == 0 {
		return
	}
	how := "failed"
	if t.group.audit {
		how = "failed as audit warning"
	}
	fmt.Fprintf(&t.body, "policy %s -> resource %s %s:\n", t.group.policy, t.group.resource, how)
	for i, r := range t.group.failed {
		msg := oneLine(r.Message)
		if msg == "" {
			msg = "validation failed"
		}
		fmt.Fprintf(&t.body, "%d - %s %s\n", i+1, r.Rule, msg)
	}
	t.group.failed, t.group.audit = t.group.failed[:0], false
}

// mutationWriter is a result writer that shows mutated resources itself
// when they go nowhere else.
type mutationWriter interface {
	addMutation(resource string, m mutation) error
}

func (t *textWriter) addMutation(resource string, m mutation) error {
	docs := m.generated
	if m.object != nil {
		docs = append([]map[string]any{m.object}, docs...)
	}
	for _, d := range docs {
		b, err := yamlMarshal(d)
		if err != nil {
			return err
		}
		fmt.Fprintf(&t.mutated, "\npolicy %s applied to %s:\n%s---\n", m.policy, resource, b)
	}
	if len(m.targets) > 0 {
		fmt.Fprintf(&t.mutated, "\npolicy %s applied to %s: patched targets:\n", m.policy, resource)
		for _, d := range m.targets {
			b, err := yamlMarshal(d)
			if err != nil {
				return err
			}
			fmt.Fprintf(&t.mutated, "%s---\n", b)
		}
	}
	return nil
}

func (t *textWriter) finish(c engine.Counts) error {
	t.endGroup()
	with := ""
	if t.exceptions > 0 {
		with = fmt.Sprintf(" with %d exception(s)", t.exceptions)
	}
	if _, err := fmt.Fprintf(t.w, "\nApplying %d policy rule(s) to %d resource(s)%s...\n", t.rules, t.resources, with); err != nil {
		return err
	}
	if _, err := t.mutated.WriteTo(t.w); err != nil {
		return err
	}
	if _, err := t.body.WriteTo(t.w); err != nil {
		return err
	}
	_, err := fmt.Fprintf(t.w, "\npass: %d, fail: %d, warn: %d, error: %d, skip: %d \n", c.Pass, c.Fail, c.Warn, c.Error, c.Skip)
	return err
}
