// Package layering holds the test of the module's layers: which packages
// may import which (docs/architecture.md, "Layout").
package layering
