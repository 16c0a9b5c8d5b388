package cli

import (
	"errors"
	"fmt"
	"net/url"
	"os"
	"path/filepath"
	"strings"

	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/jmespath"
)

// ErrInvalidMock is wrapped by the errors of a test file's apiCallResponses
// and globalContextEntries that the reference CLI would refuse.
var ErrInvalidMock = errors.New("invalid mock")

// apiCallMock is one entry of a test file's apiCallResponses: the answer to
// an apiCall context entry, matched by the service URL (url) or the API
// server path (urlPath), and by method when one is given.
//
//	apiCallResponses:
//	- url: https://checks.example.com/api/check   # or urlPath: /api/v1/namespaces
//	  method: POST                                 # optional: without it, any method
//	  response:
//	    statusCode: 200                            # optional, 200 by default
//	    body: {allowed: true}                      # a JSON object
type apiCallMock struct {
	URL      string `json:"url"`
	URLPath  string `json:"urlPath"`
	Method   string `json:"method"`
	Response struct {
		StatusCode int `json:"statusCode"`
		Body       any `json:"body"`
	} `json:"response"`
}

// target is the URL or path the entry answers for.
func (m *apiCallMock) target() string {
	if u := strings.TrimSpace(m.URL); u != "" {
		return u
	}
	return strings.TrimSpace(m.URLPath)
}

// key is the entry's place in the index: the target, preceded by the
// method when the entry names one.
func (m *apiCallMock) key() string {
	if method := strings.ToUpper(strings.TrimSpace(m.Method)); method != "" {
		return method + ":" + m.target()
	}
	return m.target()
}

func (m *apiCallMock) check() error {
	u, up := strings.TrimSpace(m.URL), strings.TrimSpace(m.URLPath)
	switch {
	case u == "" && up == "":
		return errors.New("one of url or urlPath is required")
	case u != "" && up != "":
		return errors.New("url and urlPath are mutually exclusive")
	}
	if u != "" {
		parsed, err := url.Parse(u)
		if err != nil {
			return fmt.Errorf("url %q is not a valid URL: %w", u, err)
		}
		if parsed.Scheme != "http" && parsed.Scheme != "https" {
			return fmt.Errorf("url %q must be an absolute http or https URL", u)
		}
		if parsed.Hostname() == "" {
			return fmt.Errorf("url %q has no host", u)
		}
	}
	if up != "" && !strings.HasPrefix(up, "/") {
		return fmt.Errorf("urlPath %q must be an absolute path, starting with /", up)
	}
	switch strings.ToUpper(strings.TrimSpace(m.Method)) {
	case "", "GET", "POST":
	default:
		return fmt.Errorf("method %q must be GET or POST", m.Method)
	}
	switch m.Response.Body.(type) {
	case nil:
		return errors.New("response.body is required")
	case map[string]any:
	default:
		return errors.New("response.body must be an object")
	}
	if sc := m.Response.StatusCode; sc != 0 && (sc < 100 || sc > 599) {
		return fmt.Errorf("response.statusCode %d must be between 100 and 599", sc)
	}
	return nil
}

// apiCallAnswer is an indexed apiCallResponses entry.
type apiCallAnswer struct {
	status int
	body   any
}

// indexAPICallMocks checks the entries and indexes them by key. Two
// entries with the same key are an error: one would hide the other.
func indexAPICallMocks(mocks []apiCallMock) (map[string]apiCallAnswer, error) {
	if len(mocks) == 0 {
		return nil, nil
	}
	index := make(map[string]apiCallAnswer, len(mocks))
	for i := range mocks {
		m := &mocks[i]
		if err := m.check(); err != nil {
			return nil, fmt.Errorf("%w: apiCallResponses[%d]: %w", ErrInvalidMock, i, err)
		}
		if _, dup := index[m.key()]; dup {
			return nil, fmt.Errorf("%w: apiCallResponses[%d]: a second entry for %q (method and url or urlPath must be unique)", ErrInvalidMock, i, m.key())
		}
		status := m.Response.StatusCode
		if status == 0 {
			status = 200
		}
		index[m.key()] = apiCallAnswer{status: status, body: m.Response.Body}
	}
	return index, nil
}

// lookupAPICallMock finds the answer for a call to target (a service URL
// or an API path) with method: an entry for that method first, then an
// entry without a method.
func lookupAPICallMock(index map[string]apiCallAnswer, method, target string) (apiCallAnswer, bool) {
	if a, ok := index[method+":"+target]; ok {
		return a, true
	}
	a, ok := index[target]
	return a, ok
}

// globalContextEntry is one entry of a test file's globalContextEntries:
// the data a globalReference context entry of that name reads.
//
//	globalContextEntries:
//	- name: deployments
//	  data: {...}               # one of data (an object),
//	  resources: [...]          # resources (objects, read as a list),
//	  resourceFiles: [a.yaml]   # or resourceFiles (relative to the test file)
//	  fieldPath: items          # optional JMESPath, applied first
//	  projections:              # optional: the entry becomes an object of
//	  - {name: names, path: "[].metadata.name"}   # these JMESPath results
type globalContextEntry struct {
	Name          string   `json:"name"`
	Data          any      `json:"data"`
	Resources     []any    `json:"resources"`
	ResourceFiles []string `json:"resourceFiles"`
	FieldPath     string   `json:"fieldPath"`
	Projections   []struct {
		Name string `json:"name"`
		Path string `json:"path"`
	} `json:"projections"`
}

func (e *globalContextEntry) check() error {
	for j, p := range e.Projections {
		if strings.TrimSpace(p.Name) == "" {
			return fmt.Errorf("projections[%d]: name is required", j)
		}
		if strings.TrimSpace(p.Path) == "" {
			return fmt.Errorf("projections[%d] %q: path is required", j, p.Name)
		}
	}
	sources := 0
	for _, set := range []bool{e.Data != nil, e.Resources != nil, e.ResourceFiles != nil} {
		if set {
			sources++
		}
	}
	switch {
	case sources > 1:
		return errors.New("data, resources and resourceFiles are mutually exclusive")
	case sources == 0:
		return errors.New("one of data, resources or resourceFiles is required")
	}
	if e.Data != nil {
		if _, ok := e.Data.(map[string]any); !ok {
			return errors.New("data must be an object")
		}
	}
	for j, r := range e.Resources {
		if _, ok := r.(map[string]any); !ok {
			return fmt.Errorf("resources[%d] must be an object (a Kubernetes manifest)", j)
		}
	}
	for j, f := range e.ResourceFiles {
		f = strings.TrimSpace(f)
		if f == "" {
			return fmt.Errorf("resourceFiles[%d]: the path is empty", j)
		}
		if filepath.IsAbs(f) || strings.HasPrefix(filepath.ToSlash(f), "/") {
			return fmt.Errorf("resourceFiles[%d] %q: the path must be relative to the test file's folder", j, f)
		}
		if c := filepath.ToSlash(filepath.Clean(f)); c == ".." || strings.HasPrefix(c, "../") {
			return fmt.Errorf("resourceFiles[%d] %q: the path must not leave the test file's folder", j, f)
		}
	}
	return nil
}

// value is what a globalReference to the entry reads: the data, or the
// list of resources, through fieldPath, then, with projections, an object
// of the projections' results.
func (e *globalContextEntry) value(jp *jmespath.Interpreter, t *testFile) (any, error) {
	var root any
	switch {
	case e.ResourceFiles != nil:
		list := []any{}
		for j, f := range e.ResourceFiles {
			path, err := t.suitePath(fmt.Sprintf("globalContextEntries %q resourceFiles[%d]", e.Name, j), strings.TrimSpace(f))
			if err != nil {
				return nil, err
			}
			objs, err := readManifests(path)
			if err != nil {
				return nil, fmt.Errorf("resourceFiles %q: %w", f, err)
			}
			list = append(list, objs...)
		}
		root = list
	case e.Resources != nil:
		root = e.Resources
	default:
		root = e.Data
	}
	if e.FieldPath != "" {
		v, err := jp.Search(e.FieldPath, root)
		if err != nil {
			return nil, fmt.Errorf("fieldPath %q: %w", e.FieldPath, err)
		}
		root = v
	}
	if len(e.Projections) == 0 {
		return root, nil
	}
	out := make(map[string]any, len(e.Projections))
	for _, p := range e.Projections {
		v, err := jp.Search(p.Path, root)
		if err != nil {
			return nil, fmt.Errorf("projection %q path %q: %w", p.Name, p.Path, err)
		}
		out[p.Name] = v
	}
	return out, nil
}

// readManifests reads every non-empty document of a YAML or JSON file.
func readManifests(path string) ([]any, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	docs, err := document.DecodeAll(data)
	if err != nil {
		return nil, err
	}
	out := make([]any, 0, len(docs))
	for _, d := range docs {
		if len(d.Object) > 0 {
			out = append(out, d.Object)
		}
	}
	return out, nil
}

// resolveGlobalContextEntries checks the entries and computes the value of
// each, by name. Paths in resourceFiles are relative to the test file's
// folder, and stay in its suite (testFile.suitePath).
func resolveGlobalContextEntries(entries []globalContextEntry, t *testFile) (map[string]any, error) {
	if len(entries) == 0 {
		return nil, nil
	}
	jp, err := jmespath.New()
	if err != nil {
		return nil, err
	}
	out := make(map[string]any, len(entries))
	for i := range entries {
		e := &entries[i]
		name := strings.TrimSpace(e.Name)
		if name == "" {
			return nil, fmt.Errorf("%w: globalContextEntries[%d]: name is required", ErrInvalidMock, i)
		}
		if _, dup := out[name]; dup {
			return nil, fmt.Errorf("%w: globalContextEntries[%d]: a second entry named %q", ErrInvalidMock, i, name)
		}
		if err := e.check(); err != nil {
			return nil, fmt.Errorf("%w: globalContextEntries[%d] %q: %w", ErrInvalidMock, i, name, err)
		}
		v, err := e.value(jp, t)
		if err != nil {
			return nil, fmt.Errorf("globalContextEntries[%d] %q: %w", i, name, err)
		}
		out[name] = v
	}
	return out, nil
}

// globalEntryValue reads a globalReference name, "entry" or
// "entry.projection", from the entries' values.
func globalEntryValue(entries map[string]any, name string) (any, bool, error) {
	entry, projection, _ := strings.Cut(name, ".")
	if i := strings.IndexByte(projection, '.'); i >= 0 {
		// Like the reference, only the first part after the entry's
		// name names a projection.
		projection = projection[:i]
	}
	v, ok := entries[entry]
	if !ok {
		return nil, false, nil
	}
	if projection == "" {
		return v, true, nil
	}
	m, isObject := v.(map[string]any)
	if !isObject {
		return nil, true, fmt.Errorf("global context entry %q: projection %q asked for, but the entry is not an object", entry, projection)
	}
	pv, ok := m[projection]
	if !ok {
		return nil, true, fmt.Errorf("global context entry %q: no projection %q", entry, projection)
	}
	return pv, true, nil
}
