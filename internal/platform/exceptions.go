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

// BindPolicyAPIFlag binds --policy-api: the group the cluster's policies
// are read from (policycache.ParseAPI).
func BindPolicyAPIFlag(fs *flag.FlagSet, api *policycache.API) {
	fs.Var(apiFlag{api}, "policy-api", `where the cluster's policies are served: "verdict" (verdict.dev, Verdict's CRDs) or "kyverno" (kyverno.io and policies.kyverno.io, with their original apiVersions: beside a running Kyverno in shadow mode, or once it is gone)`)
}

// apiFlag is a policycache.API flag.
type apiFlag struct{ api *policycache.API }

func (f apiFlag) String() string {
	if f.api == nil || f.api.Name == "" {
		return policycache.APIVerdict
	}
	return f.api.Name
}

func (f apiFlag) Set(s string) error {
	a, err := policycache.ParseAPI(s)
	if err != nil {
		return err
	}
	*f.api = a
	return nil
}
