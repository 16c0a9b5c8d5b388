package cli

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// ErrPathOutsideSuite: a test file names a path outside its suite's root
// (the directory given to `verdict test`), and --allow-paths-outside-suite
// is not set.
var ErrPathOutsideSuite = errors.New("path outside the test suite")

// OutsidePathError is the refusal of one path a test file names.
type OutsidePathError struct {
	// TestFile is the test file (its errors are prefixed with it), Field
	// the field that names the path (policies[1],
	// results[0].patchedResource, ...), Path the path as written, Root
	// the suite's root as given on the command line.
	TestFile, Field, Path, Root string
	// Via is set when the path is inside the root as written but a
	// symbolic link takes it out: the file reached that way.
	Via string
}

func (e *OutsidePathError) Error() string {
	via := ""
	if e.Via != "" {
		via = " (through a symbolic link: " + e.Via + ")"
	}
	return fmt.Sprintf("%s: %q is outside the test suite %s%s; run verdict test on a folder that holds it, or pass --allow-paths-outside-suite", e.Field, e.Path, e.Root, via)
}

// Is makes errors.Is(err, ErrPathOutsideSuite) hold.
func (e *OutsidePathError) Is(target error) bool { return target == ErrPathOutsideSuite }

// suiteRoot is where a test file's paths must stay: the directory given
// to `verdict test` (for a file given itself, its directory), with its
// symbolic links resolved by os.Root.
type suiteRoot struct {
	dir string // absolute
	// given is the root as given on the command line, for messages.
	given string
	// allowOutside lifts the check (--allow-paths-outside-suite).
	allowOutside bool
	// trustedRoot is the run's Sigstore trusted root file
	// (--sigstore-trusted-root), for the suite's image verifications.
	trustedRoot string
}

// suitePath resolves p, named by field of the test file t, relative to the
// test file's folder, and refuses it when it leaves the suite's root:
// absolute or with .. beyond the root, or through a symbolic link, of
// the path or, for a directory, of any file below it (os.Root resolves
// them as the reads will). A path that does not exist is returned as it
// is: reading it gives the usual error.
func (t *testFile) suitePath(field, p string) (string, error) {
	full := p
	if !filepath.IsAbs(full) {
		full = filepath.Join(t.dir, full)
	}
	if t.root == nil || t.root.allowOutside {
		return full, nil
	}
	refuse := func(via string) error {
		return &OutsidePathError{TestFile: t.path, Field: field, Path: p, Root: t.root.given, Via: via}
	}
	abs, err := filepath.Abs(full)
	if err != nil {
		return "", refuse("")
	}
	rel, err := filepath.Rel(t.root.dir, abs)
	if err != nil || !filepath.IsLocal(rel) {
		return "", refuse("")
	}
	root, err := os.OpenRoot(t.root.dir)
	if err != nil {
		return "", fmt.Errorf("%s: %s: %w", t.path, field, err)
	}
	defer func() { _ = root.Close() }()
	inside := func(rel, abs string) error {
		if _, err := root.Stat(rel); err != nil {
			if _, serr := os.Stat(abs); serr == nil {
				// It exists, but not inside the root: a link leads out.
				return refuse(abs)
			}
		}
		return nil
	}
	if err := inside(rel, abs); err != nil {
		return "", err
	}
	if st, err := root.Stat(rel); err == nil && st.IsDir() {
		// Directories are read whole: every file below must stay too.
		err := filepath.WalkDir(abs, func(path string, d fs.DirEntry, err error) error {
			if err != nil || d.Type()&fs.ModeSymlink == 0 {
				return err
			}
			r, rerr := filepath.Rel(t.root.dir, path)
			if rerr != nil {
				return refuse(path)
			}
			return inside(r, path)
		})
		if err != nil {
			return "", err
		}
	}
	return full, nil
}

// suitePaths resolves every path of a list field.
func (t *testFile) suitePaths(field string, ps []string) ([]string, error) {
	out := make([]string, len(ps))
	for i, p := range ps {
		var err error
		if out[i], err = t.suitePath(fmt.Sprintf("%s[%d]", field, i), p); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// joined is p relative to the test file's folder, for the paths load
// has already checked with suitePath (the files results are compared
// with).
func (t *testFile) joined(p string) string {
	if filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(t.dir, p)
}
