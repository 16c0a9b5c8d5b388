package cli

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/engine/document"
)

// testFile is a Kyverno CLI test (cli.kyverno.io/v1alpha1 Test).
type testFile struct {
	path string
	dir  string
	// root is where the paths it names must stay (suitePath); nil: no
	// check.
	root       *suiteRoot
	Metadata   struct{ Name string } `json:"metadata"`
	Name       string                `json:"name"`
	Policies   []string              `json:"policies"`
	Resources  []string              `json:"resources"`
	Exceptions []string              `json:"exceptions"`
	Variables  string                `json:"variables"`
	// Values are the values inline; when given, the variables file is
	// not read (as in the reference CLI).
	Values   *valuesFile  `json:"values"`
	UserInfo string       `json:"userinfo"`
	Context  string       `json:"context"`
	Results  []testResult `json:"results"`
	// TargetResources are the existing resources of mutate-existing
	// rules; they are read only to tell results about them apart.
	TargetResources      []string             `json:"targetResources"`
	APICallResponses     []apiCallMock        `json:"apiCallResponses"`
	GlobalContextEntries []globalContextEntry `json:"globalContextEntries"`
	// JSONPayloads are files of JSON payloads (no Kubernetes objects),
	// which ValidatingPolicies in JSON evaluation mode validate; a result
	// names one by its file name.
	JSONPayloads []string `json:"jsonPayloads"`
	// JSONPayload is one more such file (the reference's older field).
	JSONPayload string `json:"jsonPayload"`
	// ClusterResources are files of kind ClusterResource: objects of the
	// reference CLI's fake cluster, which context entries and CEL's
	// resource.Get and resource.List read.
	ClusterResources []string `json:"clusterResources"`
	// ParamResources are files of the params objects of Kubernetes
	// admission policies (a binding's paramRef); namespaced ones without
	// a namespace are in default.
	ParamResources []string `json:"paramResources"`
}

// testResult is one expected outcome.
type testResult struct {
	Policy    string   `json:"policy"`
	Rule      string   `json:"rule"`
	Kind      string   `json:"kind"`
	Namespace string   `json:"namespace"`
	Resources []string `json:"resources"`
	Resource  string   `json:"resource"`
	// ResourceSpecs name resources by namespace and name (group, version
	// and kind are read but, as in the reference CLI, only the namespace
	// and name select).
	ResourceSpecs []resourceSpec `json:"resourceSpecs"`
	// GeneratedResources are files of the resources a generate rule may
	// create: each one it creates must equal one of them.
	GeneratedResources  []string `json:"generatedResources"`
	Result              string   `json:"result"`
	Status              string   `json:"status"`
	PatchedResource     string   `json:"patchedResource"`
	PatchedResources    string   `json:"patchedResources"`
	GeneratedResource   string   `json:"generatedResource"`
	CloneSourceResource string   `json:"cloneSourceResource"`
	// Operation, when given, is the operation (CREATE, UPDATE or DELETE)
	// the result is about: the resources are evaluated once more as it.
	Operation string `json:"operation"`
	// FailOnMissingResources makes a resource missing from the
	// patchedResources file a failure; without it, the rule result is
	// left out, as the reference CLI does.
	FailOnMissingResources bool `json:"failOnMissingResources"`

	IsValidatingPolicy          bool `json:"isValidatingPolicy"`
	IsMutatingPolicy            bool `json:"isMutatingPolicy"`
	IsMUtatingPolicy            bool `json:"isMUtatingPolicy"`
	IsGeneratingPolicy          bool `json:"isGeneratingPolicy"`
	IsImageValidatingPolicy     bool `json:"isImageValidatingPolicy"`
	IsDeletingPolicy            bool `json:"isDeletingPolicy"`
	IsValidatingAdmissionPolicy bool `json:"isValidatingAdmissionPolicy"`
	IsMutatingAdmissionPolicy   bool `json:"isMutatingAdmissionPolicy"`
}

func (r *testResult) expected() string {
	if r.Result != "" {
		return r.Result
	}
	return r.Status
}

func (r *testResult) resourceNames() []string {
	out := r.Resources
	if len(out) == 0 && r.Resource != "" {
		out = []string{r.Resource}
	}
	for _, s := range r.ResourceSpecs {
		ref := s.Name
		if s.Namespace != "" {
			ref = s.Namespace + "/" + s.Name
		}
		out = append(out[:len(out):len(out)], ref)
	}
	return out
}

// resourceSpec is one entry of a result's resourceSpecs.
type resourceSpec struct {
	Group       string `json:"group"`
	Version     string `json:"version"`
	Kind        string `json:"kind"`
	Namespace   string `json:"namespace"`
	Subresource string `json:"subresource"`
	Name        string `json:"name"`
}

func (r *testResult) patched() string {
	if r.PatchedResources != "" {
		return r.PatchedResources
	}
	return r.PatchedResource
}

// readTestFiles reads the Test documents of a test file: one, or
// several separated by "---", each a test of its own (as the reference
// CLI reads them).
func readTestFiles(path string, root *suiteRoot) ([]*testFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	docs, err := document.DecodeAll(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	var out []*testFile
	for _, d := range docs {
		if d.Object == nil {
			continue
		}
		b, err := json.Marshal(d.Object)
		if err != nil {
			return nil, err
		}
		t := &testFile{path: path, dir: filepath.Dir(path), root: root}
		if err := json.Unmarshal(b, t); err != nil {
			return nil, fmt.Errorf("%s: document %d: %w", path, d.Index+1, err)
		}
		out = append(out, t)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no Test document", path)
	}
	return out, nil
}

// valuesFile is a Kyverno CLI values file (kind Values).
type valuesFile struct {
	Policies []struct {
		Name      string `json:"name"`
		Resources []struct {
			Name   string         `json:"name"`
			Values map[string]any `json:"values"`
		} `json:"resources"`
		Rules []struct {
			Name          string         `json:"name"`
			Values        map[string]any `json:"values"`
			ForeachValues map[string]any `json:"foreachValues"`
		} `json:"rules"`
	} `json:"policies"`
	GlobalValues      map[string]any    `json:"globalValues"`
	APICallResponses  []apiCallResponse `json:"apiCallResponses"`
	GlobalReferences  map[string]any    `json:"globalReferences"`
	NamespaceSelector []struct {
		Name   string            `json:"name"`
		Labels map[string]string `json:"labels"`
	} `json:"namespaceSelector"`
	// Namespaces are Namespace objects: what CEL's namespaceObject is for
	// resources in them (and their labels, for namespaceSelector).
	Namespaces []map[string]any `json:"namespaces"`
	// Subresources say which kinds of object are requests on a
	// subresource: a resource of the subresource's group, version and
	// kind (PodExecOptions, Scale) is evaluated as a request on that
	// subresource ("exec" of "pods/exec") of the parent's kind.
	Subresources []struct {
		Subresource    apiResource `json:"subresource"`
		ParentResource apiResource `json:"parentResource"`
	} `json:"subresources"`
}

// apiResource is the part of a Kubernetes APIResource a values file's
// subresources use.
type apiResource struct {
	Name    string `json:"name"`
	Group   string `json:"group"`
	Version string `json:"version"`
	Kind    string `json:"kind"`
}

// subresourceOf returns, for an object that stands for a request on a
// subresource, the parent's kind and the subresource's name.
func (v *valuesFile) subresourceOf(obj map[string]any) (engine.GroupVersionKind, string, bool) {
	if v == nil {
		return engine.GroupVersionKind{}, "", false
	}
	apiVersion := document.String(obj, "apiVersion")
	group, version := "", apiVersion
	if i := strings.LastIndexByte(apiVersion, '/'); i >= 0 {
		group, version = apiVersion[:i], apiVersion[i+1:]
	}
	kind := document.String(obj, "kind")
	for _, s := range v.Subresources {
		sub := s.Subresource
		if sub.Group != group || sub.Version != version || sub.Kind != kind {
			continue
		}
		_, name, ok := strings.Cut(sub.Name, "/")
		if !ok {
			continue
		}
		p := s.ParentResource
		return engine.GroupVersionKind{Group: p.Group, Version: p.Version, Kind: p.Kind}, name, true
	}
	return engine.GroupVersionKind{}, "", false
}

func readValues(path string) (*valuesFile, error) {
	var vf valuesFile
	return &vf, decodeFileInto(path, &vf)
}

// resourceValues returns the values for one policy on one resource:
// global values, then the policy's resource values.
func (v *valuesFile) resourceValues(policyName, resourceName string) map[string]any {
	out := map[string]any{}
	if v == nil {
		return out
	}
	for k, val := range v.GlobalValues {
		out[k] = val
	}
	for _, p := range v.Policies {
		if p.Name != policyName {
			continue
		}
		for _, r := range p.Resources {
			if r.Name == resourceName {
				for k, val := range r.Values {
					out[k] = val
				}
			}
		}
	}
	return out
}

func (v *valuesFile) ruleValues(policyName, ruleName string) map[string]any {
	if v == nil {
		return nil
	}
	for _, p := range v.Policies {
		if p.Name != policyName {
			continue
		}
		for _, r := range p.Rules {
			if r.Name == ruleName || "autogen-"+r.Name == ruleName || "autogen-cronjob-"+r.Name == ruleName {
				return r.Values
			}
		}
	}
	return nil
}

// foreachValues returns the values of a rule's foreachValues for the
// element at index: each is a list, and element i takes its item i.
// (Kyverno's CLI store always reads item 0, an index it never moves; the
// items are meant per element, and the tests that use them pass either
// way.)
func (v *valuesFile) foreachValues(policyName, ruleName string, index int) map[string]any {
	if v == nil {
		return nil
	}
	for _, p := range v.Policies {
		if p.Name != policyName {
			continue
		}
		for _, r := range p.Rules {
			if r.Name != ruleName && "autogen-"+r.Name != ruleName && "autogen-cronjob-"+r.Name != ruleName {
				continue
			}
			out := map[string]any{}
			for k, val := range r.ForeachValues {
				if items, ok := val.([]any); ok && index < len(items) {
					out[k] = items[index]
				}
			}
			return out
		}
	}
	return nil
}

func (v *valuesFile) namespaceLabels(ns string) map[string]string {
	if v == nil {
		return nil
	}
	for _, s := range v.NamespaceSelector {
		if s.Name == ns {
			return s.Labels
		}
	}
	if o := v.namespaceObject(ns); o != nil {
		return document.StringMap(o, "metadata", "labels")
	}
	return nil
}

// namespaceObject is the values file's Namespace named ns, or nil.
func (v *valuesFile) namespaceObject(ns string) map[string]any {
	if v == nil || ns == "" {
		return nil
	}
	for _, o := range v.Namespaces {
		if document.String(o, "metadata", "name") == ns {
			return o
		}
	}
	return nil
}

// userInfoFile is a Kyverno CLI user info file (kind UserInfo).
type userInfoFile struct {
	Roles        []string `json:"roles"`
	ClusterRoles []string `json:"clusterRoles"`
	UserInfo     struct {
		Username string   `json:"username"`
		UID      string   `json:"uid"`
		Groups   []string `json:"groups"`
	} `json:"userInfo"`
}

func readUserInfo(path string) (*userInfoFile, error) {
	var u userInfoFile
	return &u, decodeFileInto(path, &u)
}

// contextFile is a Kyverno CLI context file (kind Context): objects an
// apiCall, configMap entry or CEL resource.Get may read, and image data
// (the reference CLI's list of entries, each naming its image).
type contextFile struct {
	Spec struct {
		Resources []map[string]any `json:"resources"`
		Images    []map[string]any `json:"images"`
	} `json:"spec"`
}

// clusterResourceFile is a Kyverno CLI ClusterResource file: objects (and
// CRDs, by path) of the cluster a test runs against.
type clusterResourceFile struct {
	Spec struct {
		CRDs      []string         `json:"crds"`
		Resources []map[string]any `json:"resources"`
	} `json:"spec"`
}

// imagesByReference indexes the context file's image data by the image
// each entry names.
func (c *contextFile) imagesByReference() (map[string]any, error) {
	out := map[string]any{}
	for i, img := range c.Spec.Images {
		ref, _ := img["image"].(string)
		if ref == "" {
			return nil, fmt.Errorf("spec.images[%d]: no image", i)
		}
		out[ref] = img
	}
	return out, nil
}

func readContext(path string) (*contextFile, error) {
	var c contextFile
	return &c, decodeFileInto(path, &c)
}

// decodeFileInto reads one YAML or JSON document into out.
func decodeFileInto(path string, out any) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	v, err := document.Decode(data)
	if err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(b, out); err != nil {
		return fmt.Errorf("%s: %w", path, err)
	}
	return nil
}
