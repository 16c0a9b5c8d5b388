// Package samples embeds the sample policies `make demo` installs: a few
// Pod Security rules enforced, a few best practices audited, a generate
// rule (a default-deny NetworkPolicy in every team Namespace), and a
// cleanup policy (finished one-off Pods deleted on a schedule).
package samples

import "embed"

// FS holds the sample policy files.
//
//go:embed *.yaml
var FS embed.FS
