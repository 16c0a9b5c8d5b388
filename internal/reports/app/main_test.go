package app_test

import (
	"os"
	"testing"

	"github.com/verdict-dev/verdict/internal/reports/reporter/reportertest"
)

// TestMain runs a replica of the service instead of the tests when
// envChild is set (TestE2EKillReplicas re-executes this binary); otherwise
// it starts one control plane for the end-to-end tests of this package
// (none under -short).
func TestMain(m *testing.M) {
	if os.Getenv(envChild) != "" {
		os.Exit(reporterChild())
	}
	os.Exit(reportertest.Main(m))
}
