package platform

import (
	"flag"
	"strconv"

	"github.com/verdict-dev/verdict/internal/platform/policycache"
)

// BindExceptionFlags binds --policy-exceptions and
// --exception-namespaces: whether the cluster's PolicyExceptions count,
// and which namespaces' exceptions reach every namespace
// (policycache.ExceptionConfig).
func BindExceptionFlags(fs *flag.FlagSet, c *policycache.ExceptionConfig) {
	fs.Var(enabledFlag{disabled: &c.Disabled}, "policy-exceptions", "honour PolicyExceptions (false: none counts)")
	StringsFlag(fs, "exception-namespaces", "namespaces whose PolicyExceptions exempt resources in every namespace; set, exceptions elsewhere are left out (logged and counted); empty: exceptions count in every namespace, each only for resources in its own (repeatable, or comma-separated)", &c.Namespaces)
}

// enabledFlag is a boolean flag that sets a "disabled" field.
type enabledFlag struct{ disabled *bool }

func (f enabledFlag) String() string {
	if f.disabled == nil {
		return "true"
	}
	return strconv.FormatBool(!*f.disabled)
}

func (f enabledFlag) Set(s string) error {
	v, err := strconv.ParseBool(s)
	if err != nil {
		return err
	}
	*f.disabled = !v
	return nil
}

func (f enabledFlag) IsBoolFlag() bool { return true }
