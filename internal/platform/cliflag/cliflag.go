// Package cliflag holds flag kinds that Verdict's commands share and the
// standard library lacks. It binds to a flag.FlagSet; a cobra command
// takes such a set with pflag's AddGoFlagSet, so the services and the
// pipeline CLI parse the same flags with one implementation.
package cliflag

import (
	"flag"
	"strings"
)

// List binds a repeatable flag whose values may also be comma-separated;
// blanks around items are dropped, empty items ignored. Each item goes
// through add, which may refuse it. The first use of the flag replaces the
// defaults (reset is called once before it), when reset is not nil.
func List(fs *flag.FlagSet, name, usage string, reset func(), add func(string) error) {
	first := true
	fs.Func(name, usage, func(s string) error {
		if first && reset != nil {
			reset()
		}
		first = false
		for _, item := range strings.Split(s, ",") {
			if item = strings.TrimSpace(item); item == "" {
				continue
			}
			if err := add(item); err != nil {
				return err
			}
		}
		return nil
	})
}

// Strings is List that appends the items to *dst.
func Strings(fs *flag.FlagSet, name, usage string, dst *[]string) {
	List(fs, name, usage, nil, func(s string) error {
		*dst = append(*dst, s)
		return nil
	})
}
