package cli

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/verdict-dev/verdict/internal/platform/manifests"
	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/policy"
)

// expandPaths turns files and directories (walked recursively, hidden
// folders skipped) into a sorted list of manifest files. "-" is stdin.
func expandPaths(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		if p == "-" {
			out = append(out, p)
			continue
		}
		files, err := manifests.Expand([]string{p})
		if err != nil {
			return nil, err
		}
		out = append(out, files...)
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
	// The standard input is read once, here: the first "-" gets it, any
	// other finds it read.
	fromStdin := map[int][]byte{}
	for i, f := range files {
		if f != "-" {
			continue
		}
		data, err := readFile(f, stdin)
		if err != nil {
			return nil, err
		}
		fromStdin[i], stdin = data, bytes.NewReader(nil)
	}
	// Files are read and parsed on every core, and merged in their order.
	indexes := make([]int, len(files))
	for i := range indexes {
		indexes[i] = i
	}
	parsed, err := mapInOrder(indexes, func(i int) (*policy.Documents, error) {
		data, ok := fromStdin[i]
		if !ok {
			var err error
			if data, err = readFile(files[i], nil); err != nil {
				return nil, err
			}
		}
		return policy.Parse(data, files[i])
	})
	if err != nil {
		return nil, err
	}
	all := &policy.Documents{}
	for _, docs := range parsed {
		all.Merge(docs)
	}
	if len(files) == 0 {
		return nil, fmt.Errorf("no YAML or JSON files found in %s", strings.Join(paths, ", "))
	}
	all.Bind()
	return all, nil
}

// resourceSource streams the resources of `verdict apply`'s --resource
// paths, one document at a time.
type resourceSource struct {
	paths            []string
	stdin            io.Reader
	maxDocumentBytes int64
	// clusterKinds are custom kinds known to be cluster-scoped (from
	// CRDs), which get no default namespace.
	clusterKinds map[string]bool
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

// resourcePiece is one document of a --resource path, read but not yet
// parsed, or (end set) the end of a path. Pieces are parsed on any core,
// and their results put back in the order they were read.
type resourcePiece struct {
	chunk document.Chunk
	// path names the file in messages.
	path string
	// input is the position of the --resource path the piece comes from.
	input int
	end   bool
	// objs, when set, are resources already read (from a cluster): the
	// piece holds them instead of a chunk.
	objs         []map[string]any
	clusterKinds map[string]bool
}

// pieces hands every document of every path to emit, in order, and after
// the last document of a path a piece with end set. A document over the
// size limit, or a file that cannot be read, is an error naming the file
// (and the document). Errors are prefixed with "resources: ".
func (s *resourceSource) pieces(emit func(resourcePiece) error) error {
	for i := range s.paths {
		for _, f := range s.files[i] {
			if err := s.readFile(f, i, emit); err != nil {
				if errors.Is(err, errStopped) {
					return err
				}
				return fmt.Errorf("resources: %w", err)
			}
		}
		if err := emit(resourcePiece{input: i, end: true}); err != nil {
			return err
		}
	}
	return nil
}

func (s *resourceSource) readFile(path string, input int, emit func(resourcePiece) error) error {
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
		c, err := dec.NextChunk()
		switch {
		case errors.Is(err, io.EOF):
			return nil
		case errors.Is(err, document.ErrDocumentTooLarge):
			return fmt.Errorf("%s: %w (see --max-document-bytes)", path, err)
		case err != nil:
			return fmt.Errorf("%s: %w", path, err)
		}
		if err := emit(resourcePiece{chunk: c, path: path, input: input, clusterKinds: s.clusterKinds}); err != nil {
			return err
		}
	}
}

// resources parses the piece into the resources it holds: none for an
// empty document or a policy, the items of a List, or the document itself.
// A namespaced resource without a namespace is put in "default". An error
// names the file and the document, prefixed with "resources: ".
func (p resourcePiece) resources() ([]map[string]any, error) {
	if p.objs != nil {
		return p.objs, nil
	}
	d, ok, err := p.chunk.Decode()
	if err != nil {
		return nil, fmt.Errorf("resources: %s: %w", p.path, err)
	}
	if !ok || policy.IsPolicyGroup(document.String(d.Object, "apiVersion")) {
		return nil, nil
	}
	if document.String(d.Object, "kind") != "List" {
		return []map[string]any{p.defaultNamespace(d.Object)}, nil
	}
	items, _ := d.Object["items"].([]any)
	out := make([]map[string]any, 0, len(items))
	for _, it := range items {
		if m, ok := it.(map[string]any); ok {
			out = append(out, p.defaultNamespace(m))
		}
	}
	return out, nil
}

// defaultNamespace puts a namespaced resource without a namespace in
// "default"; a kind the CRDs say is cluster-scoped is left as it is.
func (p resourcePiece) defaultNamespace(obj map[string]any) map[string]any {
	if p.clusterKinds[document.String(obj, "kind")] {
		return obj
	}
	return defaultNamespace(obj)
}

// noResources is the error of a path whose documents hold no resource (an
// empty file, comments only, only policies).
func (s *resourceSource) noResources(input int) error {
	return fmt.Errorf("resources: %w in %s: its documents are empty or hold only policies", ErrNoResources, inputName(s.paths[input]))
}

// inputName names a path in messages; "-" is the standard input.
func inputName(path string) string {
	if path == "-" {
		return "standard input"
	}
	return path
}
