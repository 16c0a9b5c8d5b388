// Package samples embeds the sample policies `make demo` installs: a few
// Pod Security rules enforced and a few best practices audited.
package samples

import "embed"

// FS holds the sample policy files.
//
//go:embed *.yaml
var FS embed.FS
