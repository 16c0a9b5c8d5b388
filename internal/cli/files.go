package cli

import (
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

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
