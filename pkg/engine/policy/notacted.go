package policy

// NotActedOn lists the settings of a CEL policy that Verdict reads but
// does not act on yet, each with its path and what happens instead: the
// policy webhook returns them as warnings, so that nobody relies on them
// unknowingly.
func NotActedOn(p *Policy) []string {
	var out []string
	if s := p.GPol; s != nil && s.Evaluation != nil {
		if s.Evaluation.Synchronize.enabled() {
			out = append(out, p.Kind+" "+p.Metadata.Name+": spec.evaluation.synchronize is not acted on yet: what the policy generates is applied on each trigger, but not deleted with its trigger or the policy, nor restored when changed")
		}
		if s.Evaluation.GenerateExisting.enabled() {
			out = append(out, p.Kind+" "+p.Metadata.Name+": spec.evaluation.generateExisting is not acted on yet: resources that exist when the policy is created do not trigger it")
		}
	}
	return out
}
