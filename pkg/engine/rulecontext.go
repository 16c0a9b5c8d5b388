package engine

import (
	"errors"
	"fmt"
	"strings"

	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/jmespath"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// cachedBase returns the request's base context, built once per object.
func (e *Engine) cachedBase(req *Request) *evalContext {
	c := req.scratch()
	if id := identity(req.resource()); c.base == nil || c.baseObj != id {
		c.base, c.baseObj = e.baseContext(req), id
	}
	return c.base
}

// baseContext builds the variables every rule sees: request.*, and the
// request-wide values.
func (e *Engine) baseContext(req *Request) *evalContext {
	obj := req.resource()
	g := objectGVK(obj)
	op := req.Operation
	if op == "" {
		op = OpCreate
	}
	// Empty user fields are left out, as the admission request's JSON
	// does, so that expressions over them give null.
	userInfo := map[string]any{}
	if u := req.UserInfo.Username; u != "" {
		userInfo["username"] = u
	}
	if u := req.UserInfo.UID; u != "" {
		userInfo["uid"] = u
	}
	if len(req.UserInfo.Groups) > 0 {
		userInfo["groups"] = toAnyStrings(req.UserInfo.Groups)
	}
	request := map[string]any{
		"operation": op,
		"object":    req.Object,
		"oldObject": req.OldObject,
		"userInfo":  userInfo,
		"kind":      map[string]any{"group": g.group, "version": g.version, "kind": g.kind},
		"dryRun":    req.DryRun,
	}
	if len(req.UserInfo.Roles) > 0 {
		request["roles"] = toAnyStrings(req.UserInfo.Roles)
	}
	if len(req.UserInfo.ClusterRoles) > 0 {
		request["clusterRoles"] = toAnyStrings(req.UserInfo.ClusterRoles)
	}
	if req.Object == nil {
		request["object"] = nil
	}
	if req.SubResource != "" {
		request["subResource"] = req.SubResource
	}
	request["namespace"] = req.Namespace
	if req.Namespace == "" {
		request["namespace"] = document.String(obj, "metadata", "namespace")
	}
	if req.Name != "" {
		request["name"] = req.Name
	}
	c := &evalContext{jp: e.jp, data: map[string]any{"request": request}}
	if sa := req.UserInfo.Username; strings.HasPrefix(sa, serviceAccountPrefix) {
		parts := strings.SplitN(strings.TrimPrefix(sa, serviceAccountPrefix), ":", 2)
		if len(parts) == 2 {
			c.data["serviceAccountNamespace"] = parts[0]
			c.data["serviceAccountName"] = parts[1]
		}
	} else {
		c.data["serviceAccountName"] = ""
		c.data["serviceAccountNamespace"] = ""
	}
	for k, v := range req.Values {
		c.set(k, v)
	}
	return c
}

func toAnyStrings(s []string) []any {
	out := make([]any, len(s))
	for i, v := range s {
		out[i] = v
	}
	return out
}

// loadRuleContext adds the rule's values and context entries.
func (run *ruleRun) loadRuleContext() error {
	if run.rule.usesImages {
		c := run.req.scratch()
		if id := identity(run.obj); c.images == nil || c.imageObj != id {
			c.images, c.imageObj = imagesOf(run.obj), id
		}
		run.ctx.put("images", c.images)
	}
	if run.req.RuleValues != nil {
		run.provided = run.req.RuleValues(run.policy.Name(), run.rule.Name)
		for k, v := range run.provided {
			run.ctx.set(k, v)
		}
	}
	return run.loadEntries(run.rule.Context)
}

// loadEntries evaluates context entries in order; an entry whose name the
// caller already provided is not evaluated. What an entry loads (an API
// call's answer, a ConfigMap, an image's data) is charged to the rule's
// memory budget as it arrives, and what its variable's value builds as
// it is substituted; a global context entry's data, kept once for every
// evaluation, counts only for what its JMESPath allocates.
func (run *ruleRun) loadEntries(entries []policy.ContextEntry) error {
	provided := run.provided
	for i := range entries {
		en := &entries[i]
		if _, ok := provided[en.Name]; ok {
			continue
		}
		if providedPrefix(provided, en.Name) {
			continue
		}
		if err := run.meter().check(); err != nil {
			return err
		}
		v, skip, err := run.loadEntry(en)
		if err != nil {
			return fmt.Errorf("context entry %s: %w", en.Name, err)
		}
		if !skip {
			run.ctx.set(en.Name, v)
		}
	}
	return nil
}

// providedPrefix reports whether some provided value is below name
// ("name.data.x" provides part of "name").
func providedPrefix(provided map[string]any, name string) bool {
	for k := range provided {
		if strings.HasPrefix(k, name+".") {
			return true
		}
	}
	return false
}

func (run *ruleRun) loadEntry(en *policy.ContextEntry) (any, bool, error) {
	e := run.e
	ctx := run.callCtx()
	op := run.req.Operation
	switch {
	case en.Variable != nil:
		var val any
		if en.Variable.Value != nil {
			v, err := e.substitute(run.ctx, en.Variable.Value, substStrict, op)
			if err != nil {
				return nil, false, err
			}
			val = v
		}
		if en.Variable.JMESPath != "" {
			exprAny, err := e.substitute(run.ctx, en.Variable.JMESPath, substStrict, op)
			if err != nil {
				return nil, false, err
			}
			expr := toText(exprAny)
			var res any
			if en.Variable.Value != nil {
				q, qerr := e.jp.Compile(expr)
				if qerr != nil {
					return nil, false, qerr
				}
				res, err = run.ctx.m.search(q, val)
			} else {
				res, err = run.ctx.query(expr)
				if err == nil && res == nil && missingPath(expr, run.ctx.data) {
					err = fmt.Errorf("%w in %s", ErrUnknownKey, expr)
				}
			}
			if err != nil && en.Variable.Default == nil {
				return nil, false, err
			}
			val = res
		}
		if val == nil && en.Variable.Default != nil {
			d, err := e.substitute(run.ctx, en.Variable.Default, substStrict, op)
			if err != nil {
				return nil, false, err
			}
			val = d
		}
		return val, false, nil
	case en.ConfigMap != nil:
		name, err := e.substitute(run.ctx, en.ConfigMap.Name, substStrict, op)
		if err != nil {
			return nil, false, err
		}
		ns, err := e.substitute(run.ctx, en.ConfigMap.Namespace, substStrict, op)
		if err != nil {
			return nil, false, err
		}
		cm, err := e.loader.ConfigMap(ctx, toText(ns), toText(name))
		if errors.Is(err, ErrNotAvailable) {
			return nil, true, nil
		}
		if err != nil {
			return nil, false, err
		}
		if err := run.meter().chargeMemory("configMap "+en.Name, jmespath.Size(cm)); err != nil {
			return nil, false, err
		}
		return cm, false, nil
	case en.APICall != nil:
		callAny, err := e.substitute(run.ctx, apiCallDoc(en.APICall), substStrict, op)
		if err != nil {
			return nil, false, err
		}
		call := apiCallFromDoc(callAny)
		res, err := e.loader.APICall(ctx, call)
		if errors.Is(err, ErrNotAvailable) {
			if en.APICall.Default != nil {
				return en.APICall.Default, false, nil
			}
			return nil, true, nil
		}
		if err != nil {
			// A refusal is the policy's own error: no default hides it.
			if en.APICall.Default != nil && !isRefusal(err) {
				return en.APICall.Default, false, nil
			}
			return nil, false, err
		}
		if err := run.meter().chargeMemory("apiCall "+en.Name, jmespath.Size(res)); err != nil {
			return nil, false, err
		}
		return run.applyJMESPath(res, call.JMESPath, en.APICall.Default)
	case en.GlobalReference != nil:
		res, err := e.loader.GlobalReference(ctx, en.GlobalReference.Name)
		if errors.Is(err, ErrNotAvailable) {
			return nil, true, nil
		}
		if err != nil {
			return nil, false, err
		}
		return run.applyJMESPath(res, en.GlobalReference.JMESPath, nil)
	case en.ImageRegistry != nil:
		ref, err := e.substitute(run.ctx, en.ImageRegistry.Reference, substStrict, op)
		if err != nil {
			return nil, false, err
		}
		res, err := e.loader.ImageData(ctx, toText(ref))
		if errors.Is(err, ErrNotAvailable) {
			return nil, true, nil
		}
		if err != nil {
			return nil, false, err
		}
		if err := run.meter().chargeMemory("imageRegistry "+en.Name, jmespath.Size(res)); err != nil {
			return nil, false, err
		}
		jp, err := e.substitute(run.ctx, en.ImageRegistry.JMESPath, substStrict, op)
		if err != nil {
			return nil, false, err
		}
		return run.applyJMESPath(res, toText(jp), nil)
	}
	return nil, false, fmt.Errorf("entry has no variable, configMap, apiCall, globalReference or imageRegistry")
}

func (run *ruleRun) applyJMESPath(data any, expr string, def any) (any, bool, error) {
	if expr == "" {
		return data, false, nil
	}
	q, err := run.e.jp.Compile(expr)
	if err != nil {
		return nil, false, err
	}
	res, err := run.ctx.m.search(q, data)
	if err != nil {
		if def != nil {
			return def, false, nil
		}
		return nil, false, err
	}
	if res == nil && def != nil {
		return def, false, nil
	}
	return res, false, nil
}

func apiCallDoc(c *policy.APICall) any {
	m := map[string]any{"urlPath": c.URLPath, "method": c.Method, "jmesPath": c.JMESPath}
	if len(c.Data) > 0 {
		data := make([]any, len(c.Data))
		for i, d := range c.Data {
			data[i] = map[string]any{"key": d.Key, "value": d.Value}
		}
		m["data"] = data
	}
	if c.Service != nil {
		m["service"] = map[string]any{"url": c.Service.URL, "caBundle": c.Service.CABundle}
	}
	return m
}

func apiCallFromDoc(v any) *policy.APICall {
	m, _ := v.(map[string]any)
	c := &policy.APICall{
		URLPath:  toTextOrEmpty(m["urlPath"]),
		Method:   toTextOrEmpty(m["method"]),
		JMESPath: toTextOrEmpty(m["jmesPath"]),
	}
	if data, ok := m["data"].([]any); ok {
		for _, d := range data {
			dm, _ := d.(map[string]any)
			c.Data = append(c.Data, policy.RequestData{Key: toTextOrEmpty(dm["key"]), Value: dm["value"]})
		}
	}
	if s, ok := m["service"].(map[string]any); ok {
		c.Service = &policy.ServiceCall{URL: toTextOrEmpty(s["url"]), CABundle: toTextOrEmpty(s["caBundle"])}
	}
	return c
}

func toTextOrEmpty(v any) string {
	if v == nil {
		return ""
	}
	return toText(v)
}

// imagesOf builds the `images` variable: for each container list, a map
// from container name to the parts of its image reference.
func imagesOf(obj map[string]any) map[string]any {
	out := map[string]any{}
	holder := podOf(obj)
	spec := document.Map(holder, "spec")
	if spec == nil {
		return out
	}
	for _, field := range []string{"containers", "initContainers", "ephemeralContainers"} {
		list, _ := spec[field].([]any)
		if len(list) == 0 {
			continue
		}
		m := map[string]any{}
		for _, c := range list {
			cm, _ := c.(map[string]any)
			name, _ := cm["name"].(string)
			image, _ := cm["image"].(string)
			if image == "" {
				continue
			}
			m[name] = parseImage(image).toMap()
		}
		out[field] = m
	}
	return out
}

type imageInfo struct {
	registry, path, name, tag, digest string
}

// parseImage splits an image reference the way container runtimes do:
// the first component is a registry when it has a dot or a colon or is
// localhost; otherwise the registry is docker.io.
func parseImage(image string) imageInfo {
	var info imageInfo
	rest := image
	if i := strings.Index(rest, "@"); i >= 0 {
		info.digest = rest[i+1:]
		rest = rest[:i]
	}
	if i := strings.LastIndex(rest, ":"); i >= 0 && !strings.Contains(rest[i:], "/") {
		info.tag = rest[i+1:]
		rest = rest[:i]
	}
	if i := strings.Index(rest, "/"); i >= 0 {
		first := rest[:i]
		if strings.ContainsAny(first, ".:") || first == "localhost" {
			info.registry = first
			rest = rest[i+1:]
		}
	}
	if info.registry == "" {
		info.registry = "docker.io"
	}
	info.path = rest
	info.name = rest
	if i := strings.LastIndex(rest, "/"); i >= 0 {
		info.name = rest[i+1:]
	}
	if info.tag == "" && info.digest == "" {
		info.tag = "latest"
	}
	return info
}

func (i imageInfo) toMap() map[string]any {
	ref := i.registry + "/" + i.path
	withTag := ref
	if i.tag != "" {
		withTag += ":" + i.tag
	}
	full := withTag
	if i.digest != "" {
		full = ref + "@" + i.digest
		if i.tag != "" {
			full = withTag + "@" + i.digest
		}
	}
	return map[string]any{
		"registry":         i.registry,
		"path":             i.path,
		"name":             i.name,
		"tag":              i.tag,
		"digest":           i.digest,
		"reference":        full,
		"referenceWithTag": withTag,
	}
}
