// Package samples embeds the sample policies `make demo` installs: a few
// Pod Security rules enforced, a few best practices audited, and a
// generate rule (a default-deny NetworkPolicy in every team Namespace).
package samples

import "embed"

// FS holds the sample policy files.
//
//go:embed *.yaml
var FS embed.FS
