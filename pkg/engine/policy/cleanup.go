package policy

import (
	"fmt"
	"reflect"
	"strings"
	"time"

	"github.com/verdict-dev/verdict/pkg/engine/jmespath"
)

// Kinds of cleanup policy documents (Kyverno's kyverno.io/v2 and v2beta1
// shapes; in the cluster, Verdict serves them as verdict.dev/v1).
const (
	KindClusterCleanupPolicy = "ClusterCleanupPolicy"
	KindCleanupPolicy        = "CleanupPolicy"
)

// Deletion propagation policies a cleanup policy may ask for.
const (
	PropagationForeground = "Foreground"
	PropagationBackground = "Background"
	PropagationOrphan     = "Orphan"
)

// CleanupPolicy is a ClusterCleanupPolicy (cluster-wide) or a
// CleanupPolicy (its own namespace only): on each tick of its schedule,
// the resources it matches (and its conditions select) are deleted.
type CleanupPolicy struct {
	APIVersion string      `json:"apiVersion"`
	Kind       string      `json:"kind"`
	Metadata   ObjectMeta  `json:"metadata"`
	Spec       CleanupSpec `json:"spec"`
	// Status is Kyverno's (conditions, lastExecutionTime), kept as
	// written.
	Status map[string]any `json:"status,omitempty"`
	// DPol is the spec of a DeletingPolicy or NamespacedDeletingPolicy
	// (DeletingPolicyFromObject): Spec then holds only its schedule and
	// deletion propagation policy, DPol what selects the resources.
	DPol *DeletingPolicySpec `json:"-"`
}

// Namespaced reports whether the policy is a namespaced CleanupPolicy or
// NamespacedDeletingPolicy: it deletes in its own namespace only.
func (p *CleanupPolicy) Namespaced() bool {
	return p.Kind == KindCleanupPolicy || p.Kind == KindNamespacedDeletingPolicy
}

// Key identifies the policy: "name" for a ClusterCleanupPolicy or
// DeletingPolicy, "namespace/name" for a namespaced one.
func (p *CleanupPolicy) Key() string {
	if p.Namespaced() {
		return p.Metadata.Namespace + "/" + p.Metadata.Name
	}
	return p.Metadata.Name
}

// CleanupSpec is the body of a cleanup policy.
type CleanupSpec struct {
	// Context adds variables the conditions may read, loaded once per
	// tick (variable, apiCall, globalReference; configMap and
	// imageRegistry are not allowed).
	Context []ContextEntry `json:"context,omitempty"`
	// MatchResources selects the resources to delete: any or all
	// resource filters, with at least one kind. Requester attributes
	// (roles, clusterRoles, subjects) are not allowed: there is no
	// request.
	MatchResources CleanupMatch `json:"match"`
	// ExcludeResources leaves some of the matched resources alone.
	ExcludeResources *CleanupMatch `json:"exclude,omitempty"`
	// Schedule is when the policy runs: standard cron (five fields,
	// minute hour day-of-month month day-of-week), a descriptor (@hourly,
	// @daily, @every 10m, ...), optionally after CRON_TZ=<zone> or
	// TZ=<zone>.
	Schedule string `json:"schedule"`
	// Conditions must hold for a matched resource to be deleted; the
	// resource is `target` in them.
	Conditions *Conditions `json:"conditions,omitempty"`
	// DeletionPropagationPolicy is Foreground, Background or Orphan (the
	// API server's default for the kind when absent).
	DeletionPropagationPolicy *string `json:"deletionPropagationPolicy,omitempty"`
}

// CleanupMatch is a cleanup policy's match or exclude block: any or all
// resource filters (Kyverno's v2beta1 MatchResources).
type CleanupMatch struct {
	Any []ResourceFilter `json:"any,omitempty"`
	All []ResourceFilter `json:"all,omitempty"`
}

// MatchResources is the block as the engine's matching reads it.
func (m *CleanupMatch) MatchResources() *MatchResources {
	if m == nil {
		return nil
	}
	return &MatchResources{Any: m.Any, All: m.All}
}

// Kinds lists every kind the block names, once each, in order.
func (m *CleanupMatch) Kinds() []string {
	var out []string
	seen := map[string]bool{}
	for _, list := range [][]ResourceFilter{m.Any, m.All} {
		for _, f := range list {
			for _, k := range f.Kinds {
				if !seen[k] {
					seen[k] = true
					out = append(out, k)
				}
			}
		}
	}
	return out
}

// The schema of cleanup policies, derived from the Go types.
var cleanupSchema = newSchema(reflect.TypeOf(CleanupPolicy{}))

// CleanupPolicyFromObject converts an untyped ClusterCleanupPolicy or
// CleanupPolicy, checking it for unknown fields and every problem
// ValidateCleanup finds; the error lists each with its field path. A
// DeletingPolicy or NamespacedDeletingPolicy is converted by
// DeletingPolicyFromObject.
func CleanupPolicyFromObject(obj map[string]any) (*CleanupPolicy, error) {
	if kind, _ := obj["kind"].(string); IsDeletingPolicyKind(kind) {
		return DeletingPolicyFromObject(obj)
	}
	var errs FieldErrors
	checkUnknownFields(obj, cleanupSchema, "", &errs)
	var p CleanupPolicy
	if err := fromUntyped(obj, &p); err != nil {
		errs.add("", "%v", err)
		return nil, fmt.Errorf("%s %s: %w", p.Kind, p.Metadata.Name, errs.ToAggregate())
	}
	errs = append(errs, ValidateCleanup(&p)...)
	if len(errs) > 0 {
		return nil, fmt.Errorf("%s %s: %w", p.Kind, p.Metadata.Name, errs.ToAggregate())
	}
	return &p, nil
}

// ValidateCleanup checks a cleanup policy as Kyverno's admission does,
// and returns every problem with its field path. JMESPath expressions are
// parsed with the default checker (see ValidateCleanupWith).
func ValidateCleanup(p *CleanupPolicy) FieldErrors { return ValidateCleanupWith(p, nil) }

// ValidateCleanupWith is ValidateCleanup with every JMESPath expression
// checked by checkExpr (as ValidateWith).
func ValidateCleanupWith(p *CleanupPolicy, checkExpr func(expr string) error) FieldErrors {
	ck := newChecker(checkExpr)
	var errs FieldErrors
	if p.Kind != KindClusterCleanupPolicy && p.Kind != KindCleanupPolicy {
		errs.add("kind", "must be ClusterCleanupPolicy or CleanupPolicy, not %q", p.Kind)
	}
	if p.Metadata.Name == "" {
		errs.add("metadata.name", "is required")
	}
	if _, err := ParseCronSchedule(p.Spec.Schedule); err != nil {
		errs.add("spec.schedule", "%v", err)
	}
	checkCleanupMatch(&p.Spec.MatchResources, "spec.match", true, p.Namespaced(), &errs)
	if p.Spec.ExcludeResources != nil {
		checkCleanupMatch(p.Spec.ExcludeResources, "spec.exclude", false, p.Namespaced(), &errs)
		checkMatchExcludeConflict(&p.Spec, &errs)
	}
	if len(p.Spec.MatchResources.Kinds()) == 0 {
		errs.add("spec.match", "at least one kind is required")
	}
	for i, e := range p.Spec.Context {
		switch {
		case e.ConfigMap != nil:
			errs.add(fmt.Sprintf("spec.context[%d].configMap", i), "is not allowed in a cleanup policy")
		case e.ImageRegistry != nil:
			errs.add(fmt.Sprintf("spec.context[%d].imageRegistry", i), "is not allowed in a cleanup policy")
		}
	}
	ck.checkContext(p.Spec.Context, "spec.context", &errs)
	tenant := ""
	if p.Namespaced() {
		tenant = p.Metadata.Namespace
	}
	checkContextTenancy(tenant, p.Spec.Context, "spec.context", &errs)
	ck.checkConditions(p.Spec.Conditions, "spec.conditions", &errs)
	checkPropagation(p.Spec.DeletionPropagationPolicy, &errs)
	return errs
}

// checkPropagation checks spec.deletionPropagationPolicy.
func checkPropagation(dp *string, errs *FieldErrors) {
	if dp == nil {
		return
	}
	switch *dp {
	case PropagationForeground, PropagationBackground, PropagationOrphan:
	default:
		errs.add("spec.deletionPropagationPolicy", "must be Foreground, Background or Orphan, not %q", *dp)
	}
}

// checkCleanupMatch checks a match or exclude block: the engine's checks
// of match blocks, and what a cleanup policy adds (no requester
// attributes, plain kinds, name and names not together, no namespaces in
// a namespaced policy).
func checkCleanupMatch(m *CleanupMatch, path string, required, namespaced bool, errs *FieldErrors) {
	checkMatch(m.MatchResources(), path, required, errs)
	for _, block := range []struct {
		name    string
		filters []ResourceFilter
	}{{"any", m.Any}, {"all", m.All}} {
		for i := range block.filters {
			f := &block.filters[i]
			p := fmt.Sprintf("%s.%s[%d]", path, block.name, i)
			if len(f.Roles) > 0 {
				errs.add(p+".roles", "user info is not allowed in a cleanup policy")
			}
			if len(f.ClusterRoles) > 0 {
				errs.add(p+".clusterRoles", "user info is not allowed in a cleanup policy")
			}
			if len(f.Subjects) > 0 {
				errs.add(p+".subjects", "user info is not allowed in a cleanup policy")
			}
			if f.Name != "" && len(f.Names) > 0 {
				errs.add(p+".resources", "name and names cannot both be set")
			}
			if namespaced && len(f.Namespaces) > 0 {
				errs.add(p+".resources.namespaces", "a namespaced cleanup policy cannot filter namespaces")
			}
			for j, k := range f.Kinds {
				switch {
				case strings.Contains(k, "*") || strings.Contains(k, "?"):
					errs.add(fmt.Sprintf("%s.resources.kinds[%d]", p, j), "kind %q: a cleanup policy names its kinds, without wildcards", k)
				case strings.Count(k, "/") > 2 || (strings.Count(k, "/") > 0 && isSubresource(k[strings.LastIndexByte(k, '/')+1:])):
					errs.add(fmt.Sprintf("%s.resources.kinds[%d]", p, j), "kind %q: subresources cannot be cleaned up", k)
				}
			}
		}
	}
}

// isSubresource reports whether the last part of a kind selector is a
// subresource (lower case) rather than a kind.
func isSubresource(s string) bool { return s != "" && s[0] >= 'a' && s[0] <= 'z' }

// checkMatchExcludeConflict refuses, as Kyverno does, a policy whose
// exclude block repeats one of its match filters: it could never delete
// anything that filter selects.
func checkMatchExcludeConflict(s *CleanupSpec, errs *FieldErrors) {
	ex := s.ExcludeResources
	if len(ex.All) > 0 || len(s.MatchResources.All) > 0 {
		return
	}
	for i := range s.MatchResources.Any {
		for j := range ex.Any {
			if reflect.DeepEqual(s.MatchResources.Any[i], ex.Any[j]) {
				errs.add("spec", "match.any[%d] and exclude.any[%d] are the same filter: the policy matches an empty set", i, j)
			}
		}
	}
}

// CronSchedule is a parsed cleanup schedule: standard cron fields or a
// descriptor, and the time zone it is read in.
type CronSchedule struct {
	// TimeZone is the IANA zone of a CRON_TZ= or TZ= prefix ("": UTC).
	TimeZone string
	// Every is the interval of "@every <duration>" (at least a second).
	Every time.Duration
	// Descriptor is @yearly, @annually, @monthly, @weekly, @daily,
	// @midnight or @hourly.
	Descriptor string
	// Fields are minute, hour, day of month, month and day of week, as
	// written, when neither Every nor Descriptor is set.
	Fields []string
}

// cronField is the range of one cron field, and its names.
type cronField struct {
	name     string
	min, max int
	names    map[string]int
}

var cronFields = []cronField{
	{name: "minute", min: 0, max: 59},
	{name: "hour", min: 0, max: 23},
	{name: "day of month", min: 1, max: 31},
	{name: "month", min: 1, max: 12, names: map[string]int{
		"jan": 1, "feb": 2, "mar": 3, "apr": 4, "may": 5, "jun": 6,
		"jul": 7, "aug": 8, "sep": 9, "oct": 10, "nov": 11, "dec": 12,
	}},
	{name: "day of week", min: 0, max: 6, names: map[string]int{
		"sun": 0, "mon": 1, "tue": 2, "wed": 3, "thu": 4, "fri": 5, "sat": 6,
	}},
}

// cronDescriptors are the descriptors standard cron accepts.
var cronDescriptors = map[string]bool{
	"@yearly": true, "@annually": true, "@monthly": true, "@weekly": true,
	"@daily": true, "@midnight": true, "@hourly": true,
}

// ParseCronSchedule reads a schedule as Kyverno accepts it (the standard
// cron parser): an optional CRON_TZ=<zone> or TZ=<zone> prefix, then a
// descriptor (@hourly, @every 90s, ...) or five fields (minute, hour,
// day of month, month, day of week), each a comma-separated list of *, ?,
// a number or a name (jan..dec, sun..sat), a range a-b, with an optional
// /step.
func ParseCronSchedule(spec string) (CronSchedule, error) {
	var out CronSchedule
	spec = strings.TrimSpace(spec)
	if spec == "" {
		return out, fmt.Errorf("a cron schedule is required")
	}
	if strings.HasPrefix(spec, "TZ=") || strings.HasPrefix(spec, "CRON_TZ=") {
		prefix, rest, ok := strings.Cut(spec, " ")
		if !ok {
			return out, fmt.Errorf("schedule %q: a time zone and nothing to schedule", spec)
		}
		_, zone, _ := strings.Cut(prefix, "=")
		if zone == "" {
			return out, fmt.Errorf("schedule %q: empty time zone", spec)
		}
		if _, err := time.LoadLocation(zone); err != nil {
			return out, fmt.Errorf("schedule %q: time zone %q: %w", spec, zone, err)
		}
		out.TimeZone = zone
		spec = strings.TrimSpace(rest)
	}
	if strings.HasPrefix(spec, "@") {
		if d, ok := strings.CutPrefix(spec, "@every "); ok {
			every, err := time.ParseDuration(strings.TrimSpace(d))
			if err != nil {
				return out, fmt.Errorf("schedule %q: %w", spec, err)
			}
			if every <= 0 {
				return out, fmt.Errorf("schedule %q: the interval must be positive", spec)
			}
			// As standard cron: at least a second, whole seconds.
			out.Every = max(every.Truncate(time.Second), time.Second)
			return out, nil
		}
		if !cronDescriptors[spec] {
			return out, fmt.Errorf("schedule %q: unknown descriptor", spec)
		}
		out.Descriptor = spec
		return out, nil
	}
	fields := strings.Fields(spec)
	if len(fields) != len(cronFields) {
		return out, fmt.Errorf("schedule %q: %d fields, want 5 (minute hour day-of-month month day-of-week)", spec, len(fields))
	}
	for i, f := range fields {
		if err := cronFields[i].check(f); err != nil {
			return out, fmt.Errorf("schedule %q: %s: %w", spec, cronFields[i].name, err)
		}
	}
	out.Fields = fields
	return out, nil
}

// check reads one field: a comma-separated list of ranges.
func (c cronField) check(field string) error {
	for _, r := range strings.Split(field, ",") {
		if err := c.checkRange(r); err != nil {
			return err
		}
	}
	return nil
}

// checkRange reads `*` or `?`, a value, or a range, each with an
// optional /step; a single value with a step runs to the field's maximum.
func (c cronField) checkRange(expr string) error {
	rangePart, stepPart, hasStep := strings.Cut(expr, "/")
	if strings.Contains(stepPart, "/") {
		return fmt.Errorf("too many slashes in %q", expr)
	}
	start, end := c.min, c.max
	if rangePart != "*" && rangePart != "?" {
		lo, hi, isRange := strings.Cut(rangePart, "-")
		if strings.Contains(hi, "-") {
			return fmt.Errorf("too many hyphens in %q", expr)
		}
		var err error
		if start, err = c.value(lo); err != nil {
			return err
		}
		end = start
		if isRange {
			if end, err = c.value(hi); err != nil {
				return err
			}
		} else if hasStep {
			end = c.max
		}
	}
	if hasStep {
		step, err := c.number(stepPart)
		if err != nil {
			return err
		}
		if step == 0 {
			return fmt.Errorf("step of %q must be positive", expr)
		}
	}
	switch {
	case start < c.min:
		return fmt.Errorf("%d in %q is below the minimum %d", start, expr, c.min)
	case end > c.max:
		return fmt.Errorf("%d in %q is above the maximum %d", end, expr, c.max)
	case start > end:
		return fmt.Errorf("range %q starts after it ends", expr)
	}
	return nil
}

func (c cronField) value(s string) (int, error) {
	if n, ok := c.names[strings.ToLower(s)]; ok {
		return n, nil
	}
	return c.number(s)
}

func (c cronField) number(s string) (int, error) {
	if s == "" {
		return 0, fmt.Errorf("a number is missing")
	}
	n := 0
	for _, r := range s {
		if r < '0' || r > '9' {
			return 0, fmt.Errorf("%q is not a number", s)
		}
		n = n*10 + int(r-'0')
		if n > 1000 {
			return 0, fmt.Errorf("%q is out of range", s)
		}
	}
	return n, nil
}

// newChecker is the checker of ValidateWith: checkExpr, or jmespath.Check
// when nil.
func newChecker(checkExpr func(string) error) checker {
	if checkExpr == nil {
		checkExpr = jmespath.Check
	}
	return checker{expr: checkExpr}
}
