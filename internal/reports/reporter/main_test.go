package reporter_test

import (
	"os"
	"testing"

	"github.com/verdict-dev/verdict/internal/reports/reporter/reportertest"
)

// TestMain starts one control plane for the end-to-end tests of this
// package (none under -short).
func TestMain(m *testing.M) { os.Exit(reportertest.Main(m)) }
