package cli

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// newCreate is `verdict create`: the scaffolding of Kyverno CLI files
// (a test, a PolicyException, a values file, a user info file), as
// `kyverno create` writes them, in the forms verdict and Kyverno 1.19
// read. A malformed item is an error naming it, never left out.
func newCreate(stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "create",
		Short: "Write the skeleton of a test, a PolicyException, a values file or a user info file",
	}
	cmd.AddCommand(newCreateTest(stdout), newCreateException(stdout), newCreateValues(stdout), newCreateUserInfo(stdout))
	return cmd
}

// writeCreated writes a created document as YAML to path, or to stdout.
func writeCreated(stdout io.Writer, path string, doc any) error {
	b, err := yamlMarshal(doc)
	if err != nil {
		return err
	}
	if path == "" {
		_, err = stdout.Write(b)
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

type createdTest struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Metadata   map[string]any  `json:"metadata"`
	Policies   []string        `json:"policies"`
	Resources  []string        `json:"resources"`
	Variables  string          `json:"variables,omitempty"`
	Results    []createdResult `json:"results"`
}

type createdResult struct {
	Policy           string   `json:"policy"`
	Rule             string   `json:"rule,omitempty"`
	Resources        []string `json:"resources"`
	Kind             string   `json:"kind"`
	Result           string   `json:"result"`
	PatchedResources string   `json:"patchedResources,omitempty"`
}

func newCreateTest(stdout io.Writer) *cobra.Command {
	var out, name, values string
	var policies, resources, pass, fail, skip []string
	cmd := &cobra.Command{
		Use:   "test",
		Short: "Write a kyverno-test.yaml",
		Long: `Test writes a test file (cli.kyverno.io/v1alpha1 Test) for verdict test
and the Kyverno CLI. Each expected result is
"policy,rule,resource,namespace,kind" (namespace empty for a
cluster-scoped resource, rule empty for a CEL policy), with a sixth
part naming a patchedResources file for a mutation.`,
		Example: `  verdict create test -p policy.yaml -r pods.yaml --pass require-team,check-team,web,shop,Pod -o kyverno-test.yaml`,
		Args:    cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			t := createdTest{
				APIVersion: "cli.kyverno.io/v1alpha1", Kind: "Test", Metadata: map[string]any{"name": name},
				Policies: policies, Resources: resources, Variables: values, Results: []createdResult{},
			}
			for _, group := range []struct {
				result string
				items  []string
			}{{"pass", pass}, {"fail", fail}, {"skip", skip}} {
				for _, item := range group.items {
					parts := strings.Split(item, ",")
					if len(parts) != 5 && len(parts) != 6 {
						return fmt.Errorf("--%s %q: give policy,rule,resource,namespace,kind (and a patchedResources file)", group.result, item)
					}
					r := createdResult{Policy: parts[0], Rule: parts[1], Resources: []string{parts[2]}, Kind: parts[4], Result: group.result}
					if parts[3] != "" {
						r.Resources = []string{parts[3] + "/" + parts[2]}
					}
					if len(parts) == 6 {
						r.PatchedResources = parts[5]
					}
					t.Results = append(t.Results, r)
				}
			}
			return writeCreated(stdout, out, t)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&out, "output", "o", "", "write to this file (stdout when not given)")
	f.StringVarP(&name, "name", "n", "test-name", "the test's name")
	f.StringSliceVarP(&policies, "policy", "p", nil, "policy files")
	f.StringSliceVarP(&resources, "resource", "r", nil, "resource files")
	f.StringVarP(&values, "values", "f", "", "a values file")
	f.StringArrayVar(&pass, "pass", nil, "an expected pass: policy,rule,resource,namespace,kind[,patchedResources]")
	f.StringArrayVar(&fail, "fail", nil, "an expected fail, as --pass")
	f.StringArrayVar(&skip, "skip", nil, "an expected skip, as --pass")
	return cmd
}

func newCreateException(stdout io.Writer) *cobra.Command {
	var out, namespace, apiVersion string
	var background bool
	var rules, anyOf, allOf []string
	cmd := &cobra.Command{
		Use:   "exception <name>",
		Short: "Write a PolicyException",
		Long: `Exception writes a PolicyException that exempts the resources its
filters select from the rules named: each --policy-rules is
"policy,rule[,rule...]", each --any or --all filter
"kind=Pod,name=web,namespace=shop,operation=CREATE" (any of the keys,
each as often as needed). Its apiVersion is kyverno.io/v2, which the
CLIs read; give --api-version verdict.dev/v1 to apply it in a cluster
where Verdict serves its own group.`,
		Example: `  verdict create exception allow-debug --namespace shop --policy-rules disallow-privileged,privileged-containers --any kind=Pod,name=debug`,
		Args:    cobra.ExactArgs(1),
		RunE: func(_ *cobra.Command, args []string) error {
			if len(rules) == 0 || len(anyOf)+len(allOf) == 0 {
				return errors.New("an exception names its rules (--policy-rules) and the resources it exempts (--any or --all)")
			}
			e := policy.Exception{
				APIVersion: apiVersion, Kind: policy.KindPolicyException,
				Metadata: policy.ObjectMeta{Name: args[0], Namespace: namespace},
				Spec:     policy.ExceptionSpec{Background: &background},
			}
			for _, r := range rules {
				parts := strings.Split(r, ",")
				if len(parts) < 2 || slices.Contains(parts, "") {
					return fmt.Errorf("--policy-rules %q: give policy,rule[,rule...]", r)
				}
				e.Spec.Exceptions = append(e.Spec.Exceptions, policy.ExceptionEntry{PolicyName: parts[0], RuleNames: parts[1:]})
			}
			for _, group := range []struct {
				flag  string
				items []string
				into  *[]policy.ResourceFilter
			}{{"any", anyOf, &e.Spec.Match.Any}, {"all", allOf, &e.Spec.Match.All}} {
				for _, item := range group.items {
					d, err := parseFilter(item)
					if err != nil {
						return fmt.Errorf("--%s %q: %w", group.flag, item, err)
					}
					*group.into = append(*group.into, policy.ResourceFilter{ResourceDescription: d})
				}
			}
			b, err := json.Marshal(e)
			if err != nil {
				return err
			}
			var doc map[string]any
			if err := json.Unmarshal(b, &doc); err != nil {
				return err
			}
			// The match block's own resources (an empty struct, which JSON
			// cannot leave out) beside any/all.
			if m := document.Map(doc, "spec", "match"); len(document.Map(m, "resources")) == 0 {
				delete(m, "resources")
			}
			return writeCreated(stdout, out, doc)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&out, "output", "o", "", "write to this file (stdout when not given)")
	f.StringVar(&namespace, "namespace", "default", "the exception's namespace")
	f.StringVar(&apiVersion, "api-version", "kyverno.io/v2", "the exception's apiVersion (kyverno.io/v2, or verdict.dev/v1 for the cluster)")
	f.BoolVarP(&background, "background", "b", true, "whether background scans honour the exception")
	f.StringArrayVar(&rules, "policy-rules", nil, "policy,rule[,rule...]")
	f.StringArrayVar(&anyOf, "any", nil, "a filter the resources may match: kind=,name=,namespace=,operation=")
	f.StringArrayVar(&allOf, "all", nil, "a filter the resources must all match, as --any")
	return cmd
}

// parseFilter reads "kind=Pod,name=web,...".
func parseFilter(in string) (policy.ResourceDescription, error) {
	var d policy.ResourceDescription
	for _, part := range strings.Split(in, ",") {
		k, v, ok := strings.Cut(part, "=")
		if !ok || v == "" {
			return d, fmt.Errorf("%q is not key=value", part)
		}
		switch k {
		case "kind":
			d.Kinds = append(d.Kinds, v)
		case "name":
			d.Names = append(d.Names, v)
		case "namespace":
			d.Namespaces = append(d.Namespaces, v)
		case "operation":
			d.Operations = append(d.Operations, strings.ToUpper(v))
		default:
			return d, fmt.Errorf("%q: the keys are kind, name, namespace and operation", k)
		}
	}
	return d, nil
}

type createdValues struct {
	APIVersion        string           `json:"apiVersion"`
	Kind              string           `json:"kind"`
	Metadata          map[string]any   `json:"metadata"`
	Policies          []createdPolicy  `json:"policies,omitempty"`
	GlobalValues      map[string]any   `json:"globalValues,omitempty"`
	NamespaceSelector []createdNSLabel `json:"namespaceSelector,omitempty"`
}

type createdPolicy struct {
	Name      string         `json:"name"`
	Rules     []createdNamed `json:"rules,omitempty"`
	Resources []createdNamed `json:"resources,omitempty"`
}

type createdNamed struct {
	Name   string         `json:"name"`
	Values map[string]any `json:"values"`
}

type createdNSLabel struct {
	Name   string            `json:"name"`
	Labels map[string]string `json:"labels"`
}

func newCreateValues(stdout io.Writer) *cobra.Command {
	var out string
	var globals, rules, resources, selectors []string
	cmd := &cobra.Command{
		Use:   "values",
		Short: "Write a values file",
		Long: `Values writes a values file (cli.kyverno.io/v1alpha1 Values): --global
name=value; --rule policy,rule,name=value...; --resource
policy,resource,name=value...; --ns-selector namespace,label=value...`,
		Args: cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			v := createdValues{APIVersion: "cli.kyverno.io/v1alpha1", Kind: "Values", Metadata: map[string]any{"name": "values"}}
			for _, g := range globals {
				k, val, ok := strings.Cut(g, "=")
				if !ok || k == "" {
					return fmt.Errorf("--global %q: give name=value", g)
				}
				if v.GlobalValues == nil {
					v.GlobalValues = map[string]any{}
				}
				v.GlobalValues[k] = val
			}
			policy := func(name string) *createdPolicy {
				for i := range v.Policies {
					if v.Policies[i].Name == name {
						return &v.Policies[i]
					}
				}
				v.Policies = append(v.Policies, createdPolicy{Name: name})
				return &v.Policies[len(v.Policies)-1]
			}
			for flag, items := range map[string][]string{"rule": rules, "resource": resources} {
				for _, item := range items {
					parts := strings.Split(item, ",")
					if len(parts) < 2 || parts[0] == "" || parts[1] == "" {
						return fmt.Errorf("--%s %q: give policy,%s[,name=value]", flag, item, flag)
					}
					n := createdNamed{Name: parts[1], Values: map[string]any{}}
					for _, kv := range parts[2:] {
						k, val, ok := strings.Cut(kv, "=")
						if !ok || k == "" {
							return fmt.Errorf("--%s %q: %q is not name=value", flag, item, kv)
						}
						n.Values[k] = val
					}
					p := policy(parts[0])
					if flag == "rule" {
						p.Rules = append(p.Rules, n)
					} else {
						p.Resources = append(p.Resources, n)
					}
				}
			}
			slices.SortFunc(v.Policies, func(a, b createdPolicy) int { return strings.Compare(a.Name, b.Name) })
			for _, s := range selectors {
				parts := strings.Split(s, ",")
				if len(parts) < 2 || parts[0] == "" {
					return fmt.Errorf("--ns-selector %q: give namespace,label=value[,label=value]", s)
				}
				sel := createdNSLabel{Name: parts[0], Labels: map[string]string{}}
				for _, kv := range parts[1:] {
					k, val, ok := strings.Cut(kv, "=")
					if !ok || k == "" {
						return fmt.Errorf("--ns-selector %q: %q is not label=value", s, kv)
					}
					sel.Labels[k] = val
				}
				v.NamespaceSelector = append(v.NamespaceSelector, sel)
			}
			return writeCreated(stdout, out, v)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&out, "output", "o", "", "write to this file (stdout when not given)")
	f.StringSliceVarP(&globals, "global", "g", nil, "a global value: name=value")
	f.StringArrayVar(&rules, "rule", nil, "a rule's values: policy,rule,name=value...")
	f.StringArrayVar(&resources, "resource", nil, "a resource's values: policy,resource,name=value...")
	f.StringArrayVarP(&selectors, "ns-selector", "n", nil, "a namespace's labels: namespace,label=value...")
	return cmd
}

type createdUserInfo struct {
	APIVersion   string         `json:"apiVersion"`
	Kind         string         `json:"kind"`
	Metadata     map[string]any `json:"metadata"`
	Roles        []string       `json:"roles,omitempty"`
	ClusterRoles []string       `json:"clusterRoles,omitempty"`
	UserInfo     struct {
		Username string   `json:"username"`
		Groups   []string `json:"groups,omitempty"`
	} `json:"userInfo"`
}

func newCreateUserInfo(stdout io.Writer) *cobra.Command {
	var out string
	u := createdUserInfo{APIVersion: "cli.kyverno.io/v1alpha1", Kind: "UserInfo", Metadata: map[string]any{"name": "user-info"}}
	cmd := &cobra.Command{
		Use:   "user-info",
		Short: "Write a user info file: who makes the requests (verdict apply -u, a test's userinfo)",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			if u.UserInfo.Username == "" {
				return errors.New("a user info file names its user (--username)")
			}
			return writeCreated(stdout, out, u)
		},
	}
	f := cmd.Flags()
	f.StringVarP(&out, "output", "o", "", "write to this file (stdout when not given)")
	f.StringVarP(&u.UserInfo.Username, "username", "u", "", "the user's name")
	f.StringSliceVarP(&u.Roles, "role", "r", nil, "a Role bound to the user (namespace:name)")
	f.StringSliceVarP(&u.ClusterRoles, "cluster-role", "c", nil, "a ClusterRole bound to the user")
	f.StringSliceVarP(&u.UserInfo.Groups, "group", "g", nil, "a group of the user")
	return cmd
}
