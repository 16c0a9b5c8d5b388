package cli

import (
	"fmt"
	"io"
	"runtime/debug"

	"github.com/spf13/cobra"
)

// KyvernoLevel is the Kyverno release whose policy language and CLI test
// files verdict reads.
const KyvernoLevel = "1.19"

func newVersion(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version of verdict and the Kyverno release whose policies it reads",
		Args:  cobra.NoArgs,
		RunE: func(*cobra.Command, []string) error {
			info, _ := debug.ReadBuildInfo()
			_, err := io.WriteString(stdout, versionText(info))
			return err
		},
	}
}

// versionText is what `verdict version` prints: the module version, the
// commit and time it was built from (with "-dirty" when the tree had
// changes), the Go release, and the Kyverno level, one "Key: value" per
// line, as `kyverno version` prints its own.
func versionText(info *debug.BuildInfo) string {
	version, commit, built, goVersion := "unknown", "unknown", "unknown", "unknown"
	if info != nil {
		goVersion = info.GoVersion
		if v := info.Main.Version; v != "" {
			version = v
		}
		dirty := false
		for _, s := range info.Settings {
			switch s.Key {
			case "vcs.revision":
				commit = s.Value
			case "vcs.time":
				built = s.Value
			case "vcs.modified":
				dirty = s.Value == "true"
			}
		}
		if dirty && commit != "unknown" {
			commit += "-dirty"
		}
	}
	return fmt.Sprintf("Version: %s\nCommit: %s\nBuilt: %s\nGo: %s\nKyverno: %s (the policy language and test files it reads)\n",
		version, commit, built, goVersion, KyvernoLevel)
}
