package policy

import (
	"errors"
	"fmt"
	"strings"
)

// checkTenancy refuses, when a namespaced Policy is admitted, what it
// writes literally that would read or write outside its namespace: a
// configMap entry, an apiCall path, a clone or cloneList source, a
// generate or mutate target in another namespace, an apiCall POST to
// anything but a review, a globalReference. Values with variables are
// known only when the rule runs; the engine checks every call then
// (ConfineNamespace, ConfineAPICall), so this is the early, clear half of
// the same rule.
func checkTenancy(p *Policy, errs *FieldErrors) {
	ns := ""
	if p.Namespaced() {
		ns = p.Metadata.Namespace
	}
	for i := range p.Spec.Rules {
		r := &p.Spec.Rules[i]
		path := fmt.Sprintf("spec.rules[%d]", i)
		checkContextTenancy(ns, r.Context, path+".context", errs)
		if v := r.Validation; v != nil {
			for j := range v.ForEach {
				checkContextTenancy(ns, v.ForEach[j].Context, fmt.Sprintf("%s.validate.foreach[%d].context", path, j), errs)
			}
			if v.CEL != nil && v.CEL.ParamRef != nil {
				checkNamespaceTenancy(ns, v.CEL.ParamRef.Namespace, path+".validate.cel.paramRef.namespace", errs)
			}
		}
		if m := r.Mutation; m != nil {
			for j := range m.ForEach {
				checkContextTenancy(ns, m.ForEach[j].Context, fmt.Sprintf("%s.mutate.foreach[%d].context", path, j), errs)
			}
			for j, t := range m.Targets {
				checkNamespaceTenancy(ns, t.Namespace, fmt.Sprintf("%s.mutate.targets[%d].namespace", path, j), errs)
			}
		}
		if g := r.Generation; g != nil {
			gp := path + ".generate"
			checkGenerateTenancy(ns, g.Namespace, g.Clone, g.CloneList, gp, errs)
			for j := range g.ForEach {
				fe := &g.ForEach[j]
				fp := fmt.Sprintf("%s.foreach[%d]", gp, j)
				checkContextTenancy(ns, fe.Context, fp+".context", errs)
				checkGenerateTenancy(ns, fe.Namespace, fe.Clone, fe.CloneList, fp, errs)
			}
		}
	}
}

func checkContextTenancy(ns string, entries []ContextEntry, path string, errs *FieldErrors) {
	for i, e := range entries {
		p := fmt.Sprintf("%s[%d]", path, i)
		if e.ConfigMap != nil {
			checkNamespaceTenancy(ns, e.ConfigMap.Namespace, p+".configMap.namespace", errs)
		}
		if c := e.APICall; c != nil && c.Service == nil && !hasVariables(c.URLPath) && !hasVariables(c.Method) {
			if _, err := ConfineAPICall(ns, c.Method, c.URLPath); err != nil {
				errs.add(p+".apiCall.urlPath", "%s", tenancyMessage(err))
			}
		}
		if e.GlobalReference != nil && ns != "" {
			errs.add(p+".globalReference", "a namespaced policy may not read global context entries: they are cluster-wide, and may hold data of every namespace")
		}
	}
}

func checkGenerateTenancy(ns, target string, clone *CloneFrom, cloneList *CloneList, path string, errs *FieldErrors) {
	checkNamespaceTenancy(ns, target, path+".namespace", errs)
	if cloneSet(clone) {
		checkNamespaceTenancy(ns, clone.Namespace, path+".clone.namespace", errs)
	}
	if cloneListSet(cloneList) {
		checkNamespaceTenancy(ns, cloneList.Namespace, path+".cloneList.namespace", errs)
	}
}

// checkNamespaceTenancy refuses a literal namespace other than the
// namespaced policy's own.
func checkNamespaceTenancy(ns, value, path string, errs *FieldErrors) {
	if ns == "" || value == "" || hasVariables(value) {
		return
	}
	if _, err := ConfineNamespace(ns, value, path); err != nil {
		errs.add(path, "is %s: a namespaced policy reads and writes only its own namespace, %s", value, ns)
	}
}

// tenancyMessage is the message of a refusal without its sentinel's
// prefix, for a field error.
func tenancyMessage(err error) string {
	msg := err.Error()
	for _, s := range []error{ErrOutsideNamespace, ErrAPICallRefused} {
		if errors.Is(err, s) {
			msg = strings.TrimPrefix(msg, s.Error()+": ")
		}
	}
	return msg
}

func hasVariables(s string) bool { return strings.Contains(s, "{{") }
