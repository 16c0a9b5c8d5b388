package layering

import (
	"bufio"
	"bytes"
	"os/exec"
	"strings"
	"testing"
)

const module = "github.com/verdict-dev/verdict"

// groups are the services' folders: each holds a service's domain code
// and its start-up (app), and imports no other group.
var groups = []string{"internal/webhook", "internal/reports", "internal/generator", "internal/cleaner"}

// shared are what every group builds on: they import no group.
var shared = []string{"pkg", "internal/platform", "internal/bus"}

// within reports whether path is the module's dir or below it.
func within(path, dir string) bool {
	p := module + "/" + dir
	return path == p || strings.HasPrefix(path, p+"/")
}

func groupOf(path string) string {
	for _, g := range groups {
		if within(path, g) {
			return g
		}
	}
	return ""
}

// imports lists every package of the module with the packages it
// imports (tests left out: a test may use what it likes).
func imports(t *testing.T) map[string][]string {
	t.Helper()
	cmd := exec.Command("go", "list", "-f", `{{.ImportPath}}{{range .Imports}} {{.}}{{end}}`, module+"/...")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	m := map[string][]string{}
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		m[f[0]] = f[1:]
	}
	if len(m) < 50 {
		t.Fatalf("go list gave %d packages: not the module", len(m))
	}
	return m
}

// violations returns the imports that break a layer, as "from -> to: why".
func violations(graph map[string][]string) []string {
	var out []string
	for from, tos := range graph {
		for _, to := range tos {
			if !strings.HasPrefix(to, module+"/") {
				continue
			}
			switch {
			case within(from, "pkg") && within(to, "internal"):
				out = append(out, from+" -> "+to+": a pkg/ package imports internal/, so no other module can import it")
			case groupOf(from) != "" && groupOf(to) != "" && groupOf(from) != groupOf(to):
				out = append(out, from+" -> "+to+": one service's folder imports another's")
			}
			for _, s := range shared {
				if within(from, s) && groupOf(to) != "" {
					out = append(out, from+" -> "+to+": a shared package imports a service's folder")
				}
			}
		}
	}
	return out
}

// TestLayers: no pkg/ package imports internal/, no service's folder
// imports another's, and the shared packages (pkg/, internal/platform,
// internal/bus) import no service's folder.
func TestLayers(t *testing.T) {
	if testing.Short() {
		t.Skip("runs go list over the module")
	}
	for _, v := range violations(imports(t)) {
		t.Error(v)
	}
}

// TestViolationsAreFound: each rule catches what it is about, and
// nothing else.
func TestViolationsAreFound(t *testing.T) {
	tests := map[string]struct {
		from, to string
		bad      bool
	}{
		"pkg to internal":     {"pkg/queue", "internal/bus", true},
		"group to group":      {"internal/generator", "internal/webhook/app", true},
		"shared to group":     {"internal/platform/policycache", "internal/reports/reporter", true},
		"bus to group":        {"internal/bus", "internal/cleaner", true},
		"group to shared":     {"internal/cleaner/app", "internal/platform", false},
		"within a group":      {"internal/reports/app", "internal/reports/scanner", false},
		"pkg to pkg":          {"pkg/queue", "pkg/jsonread", false},
		"a main to a group":   {"cmd/webhook", "internal/webhook/app", false},
		"webhook to webhooks": {"internal/webhook/app", "internal/webhook/registrar", false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got := violations(map[string][]string{module + "/" + tc.from: {module + "/" + tc.to}})
			if (len(got) > 0) != tc.bad {
				t.Fatalf("violations %v, want a violation: %v", got, tc.bad)
			}
		})
	}
}
