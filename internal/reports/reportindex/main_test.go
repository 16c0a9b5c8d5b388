package reportindex_test

import (
	"os"
	"testing"

	"github.com/verdict-dev/verdict/internal/reports/reporter/reportertest"
)

// TestMain starts one control plane for the tests that check results
// against an API server (none under -short).
func TestMain(m *testing.M) { os.Exit(reportertest.Main(m)) }
