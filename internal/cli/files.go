package cli

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// isManifest reports whether a file name looks like YAML or JSON.
func isManifest(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// expandPaths turns files and directories (walked recursively, hidden
// folders skipped) into a sorted list of manifest files. "-" is stdin.
func expandPaths(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		if p == "-" {
			out = append(out, p)
			continue
		}
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			out = append(out, p)
			continue
		}
		var found []string
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() && path != p && strings.HasPrefix(d.Name(), ".") {
				return filepath.SkipDir
			}
			if !d.IsDir() && isManifest(d.Name()) {
				found = append(found, path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
		sort.Strings(found)
		out = append(out, found...)
	}
	return out, nil
}

func readFile(path string, stdin io.Reader) ([]byte, error) {
	if path == "-" {
		return io.ReadAll(stdin)
	}
	return os.ReadFile(path)
}

// loadDocuments reads and sorts every document of the given paths.
func loadDocuments(paths []string, stdin io.Reader) (*policy.Documents, error) {
	files, err := expandPaths(paths)
	if err != nil {
		return nil, err
	}
	all := &policy.Documents{}
	for _, f := range files {
		data, err := readFile(f, stdin)
		if err != nil {
			return nil, err
		}
		docs, err := policy.Parse(data, f)
		if err != nil {
			return nil, err
		}
		all.Merge(docs)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no YAML or JSON files found in %s", strings.Join(paths, ", "))
	}
	return all, nil
}

// resourceSource streams the resources of `verdict apply`'s --resource
// paths, one document at a time.
type resourceSource struct {
	paths            []string
	stdin            io.Reader
	maxDocumentBytes int64
	// files are the manifest files of each path, found by check.
	files [][]string
}

// check finds the files of every path before anything is read: a missing
// path, or a folder without manifests, is an error.
func (s *resourceSource) check() error {
	s.files = make([][]string, len(s.paths))
	for i, p := range s.paths {
		files, err := expandPaths([]string{p})
		if err != nil {
			return err
		}
		if len(files) == 0 {
			return fmt.Errorf("%w in %s: it holds no .yaml, .yml or .json file", ErrNoResources, p)
		}
		s.files[i] = files
	}
	return nil
}

// each hands every resource of every path to emit, in order. Policy
// documents are skipped, the items of a List are resources, and a
// namespaced resource without a namespace is put in "default". A path
// whose documents hold no resource (an empty file, comments only, only
// policies) is an error wrapping ErrNoResources, as is a document over
// the size limit, named by file and position. Errors are prefixed with
// "resources: ".
func (s *resourceSource) each(emit func(map[string]any) error) error {
	for i, p := range s.paths {
		n := 0
		count := func(obj map[string]any) error {
			n++
			return emit(obj)
		}
		for _, f := range s.files[i] {
			if err := s.readFile(f, count); err != nil {
				if errors.Is(err, errStopped) {
					return err
				}
				return fmt.Errorf("resources: %w", err)
			}
		}
		if n == 0 {
			return fmt.Errorf("resources: %w in %s: its documents are empty or hold only policies", ErrNoResources, inputName(p))
		}
	}
	return nil
}

func (s *resourceSource) readFile(path string, emit func(map[string]any) error) error {
	r := s.stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return err
		}
		defer func() { _ = f.Close() }() // read only
		r = f
	}
	dec, err := document.NewDecoder(bufio.NewReaderSize(r, 64<<10), document.WithMaxDocumentBytes(s.maxDocumentBytes))
	if err != nil {
		return err
	}
	path = inputName(path)
	for {
		d, err := dec.Next()
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case errors.Is(err, document.ErrDocumentTooLarge):
			return fmt.Errorf("%s: %w (see --max-document-bytes)", path, err)
		case err != nil:
			return fmt.Errorf("%s: %w", path, err)
		}
		if policy.IsPolicyGroup(document.String(d.Object, "apiVersion")) {
			continue
		}
		if document.String(d.Object, "kind") != "List" {
			if err := emit(defaultNamespace(d.Object)); err != nil {
				return err
			}
			continue
		}
		items, _ := d.Object["items"].([]any)
		for _, it := range items {
			if m, ok := it.(map[string]any); ok {
				if err := emit(defaultNamespace(m)); err != nil {
					return err
				}
			}
		}
	}
}

// inputName names a path in messages; "-" is the standard input.
func inputName(path string) string {
	if path == "-" {
		return "standard input"
	}
	return path
}
