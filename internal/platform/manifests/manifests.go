// Package manifests finds the manifest files (YAML and JSON) under the
// files and folders a user names: the webhook's files mode and the
// command line read policies, resources and tests the same way.
package manifests

import (
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
)

// Is reports whether a file's name says it holds manifests: .yaml, .yml
// or .json, in any case.
func Is(name string) bool {
	switch strings.ToLower(filepath.Ext(name)) {
	case ".yaml", ".yml", ".json":
		return true
	}
	return false
}

// Expand turns files and folders into files: a file is kept as it is
// named (whatever its extension), a folder is walked for manifest files
// (Is), in name order, skipping folders whose name starts with a dot.
// A path that cannot be read is an error.
func Expand(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
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
			if !d.IsDir() && Is(d.Name()) {
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
