package helm_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"text/template"

	"github.com/prometheus/common/model"
	"github.com/prometheus/prometheus/promql/parser"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// dashboardFile is Verdict's Grafana dashboard, shipped in the chart.
const dashboardFile = "verdict/dashboards/verdict.json"

// monitoringArgs turns on every monitoring object of the chart.
var monitoringArgs = []string{
	"--set", "grafanaDashboard.enabled=true", "--set", "prometheusRule.enabled=true", "--set", "metrics.kyvernoNames=true",
}

// TestMonitoringObjects: off by default; on, the dashboard's ConfigMap
// carries the sidecar's label and the dashboard file as it is, in the
// namespace asked for, the PrometheusRule its labels and every alert the
// alertLabels, and metrics.kyvernoNames reaches the two services that
// record Kyverno's names (the webhook and the reporter's scans) as
// --kyverno-metrics.
func TestMonitoringObjects(t *testing.T) {
	for _, u := range decode(t, render(t)) {
		if u.GetKind() == "PrometheusRule" || strings.HasSuffix(u.GetName(), "-grafana-dashboard") {
			t.Errorf("%s %s rendered by default", u.GetKind(), u.GetName())
		}
	}
	if m := parse(t, render(t)); hasFlag(m, "--kyverno-metrics") != nil {
		t.Errorf("--kyverno-metrics by default: %v", hasFlag(m, "--kyverno-metrics"))
	}

	args := append(slices.Clone(monitoringArgs), "--set", "grafanaDashboard.namespace=monitoring",
		"--set", "prometheusRule.labels.release=prometheus", "--set", "prometheusRule.alertLabels.team=platform")
	out := render(t, args...)
	want, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	var dashboards, rules int
	for _, u := range decode(t, out) {
		switch {
		case u.GetKind() == "ConfigMap" && strings.HasSuffix(u.GetName(), "-grafana-dashboard"):
			dashboards++
			if u.GetNamespace() != "monitoring" || u.GetLabels()["grafana_dashboard"] != "1" {
				t.Errorf("dashboard ConfigMap in %q with labels %v", u.GetNamespace(), u.GetLabels())
			}
			if got, _, _ := unstructured.NestedString(u.Object, "data", "verdict.json"); got != strings.TrimRight(string(want), "\n") {
				t.Errorf("the ConfigMap's verdict.json is not %s", dashboardFile)
			}
		case u.GetKind() == "PrometheusRule":
			rules++
			if u.GetNamespace() != namespace || u.GetLabels()["release"] != "prometheus" {
				t.Errorf("PrometheusRule in %q with labels %v", u.GetNamespace(), u.GetLabels())
			}
			for _, g := range ruleGroups(t, u) {
				for _, r := range g.Rules {
					if r.Labels["team"] != "platform" {
						t.Errorf("%s: labels %v, no alertLabels", r.Alert, r.Labels)
					}
				}
			}
		}
	}
	if dashboards != 1 || rules != 1 {
		t.Errorf("%d dashboard ConfigMaps, %d PrometheusRules; want one of each", dashboards, rules)
	}
	with := hasFlag(parse(t, out), "--kyverno-metrics")
	if !slices.Equal(with, []string{"reporter", "webhook"}) {
		t.Errorf("--kyverno-metrics in %v, want the reporter and the webhook", with)
	}
}

// hasFlag lists the Deployments whose container has the flag.
func hasFlag(m manifest, flag string) []string {
	var out []string
	for _, svc := range slices.Sorted(maps.Keys(m.deployments)) {
		if slices.Contains(m.deployments[svc].Spec.Template.Spec.Containers[0].Args, flag) {
			out = append(out, svc)
		}
	}
	return out
}

// dashboard is the part of a Grafana dashboard the lint reads.
type dashboard struct {
	Title         string `json:"title"`
	UID           string `json:"uid"`
	SchemaVersion int    `json:"schemaVersion"`
	Templating    struct {
		List []struct {
			Name       string          `json:"name"`
			Type       string          `json:"type"`
			Query      json.RawMessage `json:"query"`
			Datasource *datasource     `json:"datasource"`
		} `json:"list"`
	} `json:"templating"`
	Panels []panel `json:"panels"`
}

type datasource struct {
	Type string `json:"type"`
	UID  string `json:"uid"`
}

type panel struct {
	ID         int         `json:"id"`
	Type       string      `json:"type"`
	Title      string      `json:"title"`
	Datasource *datasource `json:"datasource"`
	GridPos    struct {
		H, W, X, Y int
	} `json:"gridPos"`
	Targets []struct {
		Expr       string      `json:"expr"`
		RefID      string      `json:"refId"`
		Datasource *datasource `json:"datasource"`
	} `json:"targets"`
	Panels []panel `json:"panels"`
}

// grafanaVars are the dashboard's variables as a query sees them once
// Grafana has filled them in.
var grafanaVars = strings.NewReplacer("$__rate_interval", "5m", "$__interval", "1m", "$__range", "1h", "$namespace", ".*")

// labelValues is a Grafana variable query: label_values(metric, label).
var labelValues = regexp.MustCompile(`^label_values\(\s*([a-zA-Z_:][a-zA-Z0-9_:]*)\s*,\s*[a-zA-Z_][a-zA-Z0-9_]*\s*\)$`)

// problems collects what a lint finds.
type problems []string

func (p *problems) add(format string, args ...any) { *p = append(*p, fmt.Sprintf(format, args...)) }

// lintDashboard checks the dashboard's shape (a title and uid, a
// Prometheus data source variable every panel and query uses, unique
// panel ids, panels within the 24 columns that do not overlap) and that
// every query is PromQL the parser takes, and returns the metric names
// the queries and variables read.
func lintDashboard(data []byte) (map[string]bool, problems) {
	var errs problems
	var d dashboard
	if err := json.Unmarshal(data, &d); err != nil {
		errs.add("%v", err)
		return nil, errs
	}
	if d.Title == "" || d.UID == "" || len(d.UID) > 40 || d.SchemaVersion == 0 {
		errs.add("title %q, uid %q (at most 40 characters), schemaVersion %d", d.Title, d.UID, d.SchemaVersion)
	}
	names := map[string]bool{}
	vars := map[string]bool{}
	for _, v := range d.Templating.List {
		vars[v.Name] = true
		switch v.Type {
		case "datasource":
			var q string
			if err := json.Unmarshal(v.Query, &q); err != nil || q != "prometheus" {
				errs.add("variable %s: query %s, want prometheus", v.Name, v.Query)
			}
		case "query":
			var q struct {
				Query string `json:"query"`
			}
			if err := json.Unmarshal(v.Query, &q); err != nil {
				errs.add("variable %s: %v", v.Name, err)
			}
			m := labelValues.FindStringSubmatch(q.Query)
			if m == nil {
				errs.add("variable %s: query %q is not label_values(metric, label)", v.Name, q.Query)
				continue
			}
			names[m[1]] = true
			checkDatasource(&errs, "variable "+v.Name, v.Datasource)
		}
	}
	if !vars["datasource"] || !vars["namespace"] {
		errs.add("variables %v: want datasource and namespace", slices.Sorted(maps.Keys(vars)))
	}
	ids := map[int]string{}
	type rect struct {
		title      string
		x, y, w, h int
	}
	var rects []rect
	var walk func(ps []panel)
	walk = func(ps []panel) {
		for _, p := range ps {
			if prev, dup := ids[p.ID]; dup || p.ID <= 0 {
				errs.add("panel %q: id %d (also %q)", p.Title, p.ID, prev)
			}
			ids[p.ID] = p.Title
			g := p.GridPos
			if g.W < 1 || g.H < 1 || g.X < 0 || g.X+g.W > 24 || g.Y < 0 {
				errs.add("panel %q: gridPos %+v outside the 24 columns", p.Title, g)
			}
			for _, r := range rects {
				if g.X < r.x+r.w && r.x < g.X+g.W && g.Y < r.y+r.h && r.y < g.Y+g.H {
					errs.add("panel %q overlaps %q", p.Title, r.title)
				}
			}
			rects = append(rects, rect{p.Title, g.X, g.Y, g.W, g.H})
			if p.Type == "row" {
				walk(p.Panels)
				continue
			}
			if p.Title == "" || len(p.Targets) == 0 {
				errs.add("panel %d: title %q, %d queries", p.ID, p.Title, len(p.Targets))
			}
			checkDatasource(&errs, "panel "+p.Title, p.Datasource)
			refs := map[string]bool{}
			for _, q := range p.Targets {
				checkDatasource(&errs, "panel "+p.Title+" query "+q.RefID, q.Datasource)
				if q.RefID == "" || refs[q.RefID] {
					errs.add("panel %q: refId %q missing or twice", p.Title, q.RefID)
				}
				refs[q.RefID] = true
				_, qn, err := promql(grafanaVars.Replace(q.Expr))
				if err != nil {
					errs.add("panel %q: %v", p.Title, err)
				}
				for n := range qn {
					names[n] = true
				}
			}
		}
	}
	walk(d.Panels)
	return names, errs
}

func checkDatasource(errs *problems, what string, ds *datasource) {
	if ds == nil || ds.Type != "prometheus" || ds.UID != "${datasource}" {
		errs.add("%s: data source %+v, want the dashboard's variable", what, ds)
	}
}

// promql parses expr with Prometheus's PromQL parser (promtool's) and
// returns it and the metric names its selectors read.
func promql(expr string) (parser.Expr, map[string]bool, error) {
	e, err := parser.ParseExpr(expr)
	if err != nil {
		return nil, nil, fmt.Errorf("could not parse %q: %w", expr, err)
	}
	names := map[string]bool{}
	var unnamed error
	parser.Inspect(e, func(n parser.Node, _ []parser.Node) error {
		if vs, ok := n.(*parser.VectorSelector); ok {
			if vs.Name == "" {
				unnamed = fmt.Errorf("a selector without a metric name: %s", vs)
			}
			names[vs.Name] = true
		}
		return nil
	})
	return e, names, unnamed
}

// rule is a rule of a PrometheusRule's group.
type rule struct {
	Alert       string            `json:"alert,omitempty"`
	Record      string            `json:"record,omitempty"`
	Expr        string            `json:"expr"`
	For         string            `json:"for,omitempty"`
	Labels      map[string]string `json:"labels,omitempty"`
	Annotations map[string]string `json:"annotations,omitempty"`
}

// ruleGroup is a PrometheusRule's group, as prometheus-operator reads it.
type ruleGroup struct {
	Name     string `json:"name"`
	Interval string `json:"interval,omitempty"`
	Rules    []rule `json:"rules"`
}

// ruleGroups reads a PrometheusRule's groups, refusing any field the
// operator does not know.
func ruleGroups(t *testing.T, u *unstructured.Unstructured) []ruleGroup {
	t.Helper()
	if u.GetAPIVersion() != "monitoring.coreos.com/v1" {
		t.Errorf("PrometheusRule apiVersion %s", u.GetAPIVersion())
	}
	groups, _, _ := unstructured.NestedSlice(u.Object, "spec", "groups")
	b, err := json.Marshal(groups)
	if err != nil {
		t.Fatal(err)
	}
	var out []ruleGroup
	if err := yaml.UnmarshalStrict(b, &out); err != nil {
		t.Fatalf("PrometheusRule groups: %v", err)
	}
	return out
}

var (
	metricNameRE = regexp.MustCompile(`^[a-zA-Z_:][a-zA-Z0-9_:]*$`)
	labelNameRE  = regexp.MustCompile(`^[a-zA-Z_][a-zA-Z0-9_]*$`)
)

// templateFuncs are the functions of Prometheus's alert templates
// (its template package's expander), stubbed: parsing needs their names
// only.
var templateFuncs = func() template.FuncMap {
	fm := template.FuncMap{}
	for _, n := range []string{"query", "first", "label", "value", "strvalue", "args", "reReplaceAll", "safeHtml", "match",
		"title", "toUpper", "toLower", "graphLink", "tableLink", "sortByLabel", "humanize", "humanize1024",
		"humanizeDuration", "humanizePercentage", "humanizeTimestamp", "toTime", "toDuration", "pathPrefix",
		"externalURL", "parseDuration", "stripPort", "stripDomain", "now"} {
		fm[n] = func(...any) any { return nil }
	}
	return fm
}()

// templateHeader defines the variables Prometheus gives every alert
// template, as its rule validation does.
const templateHeader = "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}"

// lintRules checks every group and rule as promtool check rules does
// (names, a PromQL expression the parser takes and that gives a vector, a
// duration for for, label names, templates that parse) and what Verdict
// asks of its alerts (a severity of warning or critical, a summary and a
// description), and returns the metric names the expressions read.
func lintRules(groups []ruleGroup) (map[string]bool, problems) {
	var errs problems
	names := map[string]bool{}
	seenGroups, seenAlerts := map[string]bool{}, map[string]bool{}
	for _, g := range groups {
		if g.Name == "" || seenGroups[g.Name] {
			errs.add("group %q: empty or twice", g.Name)
		}
		seenGroups[g.Name] = true
		if len(g.Rules) == 0 {
			errs.add("group %s: no rules", g.Name)
		}
		for _, r := range g.Rules {
			what := g.Name + "/" + r.Alert
			if r.Record != "" || !metricNameRE.MatchString(r.Alert) || seenAlerts[r.Alert] {
				errs.add("%s: an alert (not a recording rule) with a valid name, once", what)
			}
			seenAlerts[r.Alert] = true
			e, rn, err := promql(r.Expr)
			if err != nil {
				errs.add("%s: %v", what, err)
			} else if e.Type() != parser.ValueTypeVector {
				errs.add("%s: the expression is a %s, an alert needs a vector", what, e.Type())
			}
			for n := range rn {
				names[n] = true
			}
			if r.For != "" {
				if _, err := model.ParseDuration(r.For); err != nil {
					errs.add("%s: for: %v", what, err)
				}
			}
			if s := r.Labels["severity"]; s != "warning" && s != "critical" {
				errs.add("%s: severity %q", what, s)
			}
			for k, v := range r.Labels {
				if !labelNameRE.MatchString(k) {
					errs.add("%s: label name %q", what, k)
				}
				parseTemplate(&errs, what+" label "+k, v)
			}
			if r.Annotations["summary"] == "" || r.Annotations["description"] == "" {
				errs.add("%s: annotations %v, want a summary and a description", what, r.Annotations)
			}
			for k, v := range r.Annotations {
				parseTemplate(&errs, what+" annotation "+k, v)
			}
		}
	}
	return names, errs
}

func parseTemplate(errs *problems, what, text string) {
	if _, err := template.New(what).Funcs(templateFuncs).Parse(templateHeader + text); err != nil {
		errs.add("%s: %v", what, err)
	}
}

// monitoringNames renders the chart's dashboard and PrometheusRule, lints
// them (failing t on a problem), and returns the metric names they read.
func monitoringNames(t *testing.T) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(dashboardFile)
	if err != nil {
		t.Fatal(err)
	}
	names, errs := lintDashboard(data)
	for _, p := range errs {
		t.Errorf("%s: %s", dashboardFile, p)
	}
	var groups []ruleGroup
	for _, u := range decode(t, render(t, monitoringArgs...)) {
		if u.GetKind() == "PrometheusRule" {
			groups = append(groups, ruleGroups(t, u)...)
		}
	}
	if len(groups) == 0 {
		t.Fatal("no PrometheusRule rendered")
	}
	ruleNames, errs := lintRules(groups)
	for _, p := range errs {
		t.Errorf("PrometheusRule: %s", p)
	}
	for n := range ruleNames {
		names[n] = true
	}
	return names
}

// TestMonitoringLint lints the dashboard and the PrometheusRule: every
// query and rule parses, and reads Verdict's own metrics only (that each
// exists, TestE2EMonitoringMetricsExist checks on the running services).
// A broken rule fails the lint.
func TestMonitoringLint(t *testing.T) {
	for _, n := range slices.Sorted(maps.Keys(monitoringNames(t))) {
		if !strings.HasPrefix(n, "verdict_") {
			t.Errorf("%s: not one of Verdict's metrics", n)
		}
	}
	var bad ruleGroup
	bad.Name = "g"
	bad.Rules = append(bad.Rules, rule{Alert: "Broken", Expr: "sum(rate(x[5m]) > ", For: "5 minutes",
		Labels: map[string]string{"severity": "page"}, Annotations: map[string]string{"summary": "s", "description": "{{ $value "}})
	bad.Rules = append(bad.Rules, rule{Alert: "Scalar", Expr: "1 + 1", Labels: map[string]string{"severity": "warning"},
		Annotations: map[string]string{"summary": "s", "description": "d"}})
	_, problems := lintRules([]ruleGroup{bad})
	want := []string{"could not parse", "for:", "severity", "annotation description", "a scalar"}
	for _, w := range want {
		if !slices.ContainsFunc(problems, func(p string) bool { return strings.Contains(p, w) }) {
			t.Errorf("the lint misses %q in a broken rule: %q", w, problems)
		}
	}
	if _, problems := lintDashboard([]byte(`{"title":"x","uid":"x","schemaVersion":1,"panels":[{"id":1,"type":"timeseries","title":"p","gridPos":{"w":25,"h":1},"targets":[{"refId":"A","expr":"rate(x[$__rate_interval]"}]}]}`)); len(problems) < 3 {
		t.Errorf("a broken dashboard: %q", problems)
	}
}
