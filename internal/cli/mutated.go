package cli

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/verdict-dev/verdict/pkg/engine/document"
)

// mutatedSink receives what apply's mutations and generations produce:
// each resource as the mutations left it, the mutate-existing targets
// they patched and the resources generate rules would create, as YAML
// documents ending in "---". It writes them to a writer, to one file (a
// path ending in .yaml or .yml), or to a folder, one file per resource
// (<name>-mutated.yaml, <policy>-generated.yaml), as Kyverno's apply -o
// names them; a file is rewritten by the first document of a run and
// appended to by the next.
type mutatedSink struct {
	w    io.Writer
	file *os.File
	dir  string
	// seen are the folder's files this run has written.
	seen map[string]bool
}

// newMutatedSink opens the sink of path, else of w; nil when neither is
// given.
func newMutatedSink(path string, w io.Writer) (*mutatedSink, error) {
	switch {
	case path == "" && w == nil:
		return nil, nil
	case path == "":
		return &mutatedSink{w: w}, nil
	case strings.HasSuffix(path, ".yaml") || strings.HasSuffix(path, ".yml"):
		if err := os.MkdirAll(filepath.Dir(path), 0o750); err != nil {
			return nil, fmt.Errorf("mutated resources: %w", err)
		}
		f, err := os.Create(path)
		if err != nil {
			return nil, fmt.Errorf("mutated resources: %w", err)
		}
		return &mutatedSink{w: f, file: f}, nil
	default:
		if err := os.MkdirAll(path, 0o750); err != nil {
			return nil, fmt.Errorf("mutated resources: %w", err)
		}
		return &mutatedSink{dir: path, seen: map[string]bool{}}, nil
	}
}

func (s *mutatedSink) write(e evaluated) error {
	if e.final != nil {
		if err := s.put(document.String(e.final, "metadata", "name")+"-mutated", e.final); err != nil {
			return err
		}
	}
	for _, m := range e.mutations {
		for _, t := range m.targets {
			if err := s.put(document.String(t, "metadata", "name")+"-mutated", t); err != nil {
				return err
			}
		}
		for _, g := range m.generated {
			if err := s.put(m.policy+"-generated", g); err != nil {
				return err
			}
		}
	}
	return nil
}

// put writes one document; name names its file in a folder.
func (s *mutatedSink) put(name string, obj map[string]any) error {
	b, err := yamlMarshal(obj)
	if err != nil {
		return err
	}
	b = append(b, "---\n"...)
	if s.dir == "" {
		_, err = s.w.Write(b)
		return err
	}
	path := filepath.Join(s.dir, filepath.Base(name)+".yaml")
	flags := os.O_CREATE | os.O_WRONLY | os.O_APPEND
	if !s.seen[path] {
		flags = os.O_CREATE | os.O_WRONLY | os.O_TRUNC
		s.seen[path] = true
	}
	f, err := os.OpenFile(path, flags, 0o600)
	if err != nil {
		return fmt.Errorf("mutated resources: %w", err)
	}
	if _, err := f.Write(b); err != nil {
		_ = f.Close() // the write's error is the one to report
		return fmt.Errorf("mutated resources: %w", err)
	}
	return f.Close()
}

func (s *mutatedSink) close() error {
	if s == nil || s.file == nil {
		return nil
	}
	return s.file.Close()
}
