package cli

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/verdict-dev/verdict/pkg/engine/document"
	"github.com/verdict-dev/verdict/pkg/engine/jmespath"
)

// maxJPInput bounds what `verdict jp` reads from a file or stdin.
const maxJPInput = 64 << 20

// newJP is `verdict jp`: the JMESPath of Kyverno's policies (with its
// custom functions) on the command line, as `kyverno jp` offers it.
func newJP(stdin io.Reader, stdout io.Writer) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "jp",
		Short: "Evaluate, list and parse the JMESPath of Kyverno policies (its custom functions included)",
	}
	cmd.AddCommand(newJPQuery(stdin, stdout), newJPFunction(stdout), newJPParse(stdin, stdout))
	return cmd
}

func newJPQuery(stdin io.Reader, stdout io.Writer) *cobra.Command {
	var input string
	var files []string
	var compact, unquoted bool
	cmd := &cobra.Command{
		Use:   "query [-i input] [-q file]... [expression]...",
		Short: "Evaluate JMESPath expressions on a JSON or YAML document",
		Long: `Query evaluates each expression (given as arguments, or read from the
files of -q; with -i and neither, read from stdin) on the document of
-i, or of stdin, with the engine's JMESPath and Kyverno's custom
functions, and prints "# <expression>" and the result as JSON for each.`,
		Example: `  verdict jp query -i pod.yaml 'spec.containers[].image'
  kubectl get pod web -o json | verdict jp query -u 'metadata.name'
  verdict jp query -i deployment.yaml "truncate(metadata.name, \` + "`3`" + `)"`,
		RunE: func(_ *cobra.Command, args []string) error {
			exprs, err := jpExpressions(args, files, "-q", input != "", stdin)
			if err != nil {
				return err
			}
			src := input
			if src == "" {
				src = "-"
			}
			data, err := readBounded(src, stdin)
			if err != nil {
				return err
			}
			doc, err := document.Decode(data)
			if err != nil {
				return fmt.Errorf("input %s: %w", src, err)
			}
			jp, err := jmespath.New()
			if err != nil {
				return err
			}
			for _, expr := range exprs {
				res, err := jp.Search(expr, doc)
				if err != nil {
					return fmt.Errorf("%s: %w", expr, err)
				}
				if err := printJPResult(stdout, expr, res, compact, unquoted); err != nil {
					return err
				}
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVarP(&input, "input", "i", "", "the JSON or YAML document to query (stdin when not given)")
	f.StringSliceVarP(&files, "query", "q", nil, "read an expression from this file")
	f.BoolVarP(&compact, "compact", "c", false, "print the results as compact JSON")
	f.BoolVarP(&unquoted, "unquoted", "u", false, "print a result that is a string without quotes")
	return cmd
}

// printJPResult prints "# <expression>" and the result.
func printJPResult(w io.Writer, expr string, res any, compact, unquoted bool) error {
	if _, err := fmt.Fprintln(w, "#", expr); err != nil {
		return err
	}
	if s, isString := res.(string); unquoted && isString {
		_, err := fmt.Fprintln(w, s)
		return err
	}
	var b []byte
	var err error
	if compact {
		b, err = json.Marshal(res)
	} else {
		b, err = json.MarshalIndent(res, "", "  ")
	}
	if err != nil {
		return fmt.Errorf("%s: the result is no JSON: %w", expr, err)
	}
	_, err = fmt.Fprintln(w, string(b))
	return err
}

func newJPFunction(stdout io.Writer) *cobra.Command {
	return &cobra.Command{
		Use:   "function [name]...",
		Short: "List Kyverno's custom JMESPath functions with their arguments",
		Long: `Function lists the custom functions Kyverno adds to JMESPath (the
standard ones are JMESPath's), or those named, with the types of their
arguments ("?" after an optional one, "..." after a variadic one).`,
		RunE: func(_ *cobra.Command, names []string) error {
			sigs := jmespath.Signatures()
			known := map[string]bool{}
			for _, s := range sigs {
				known[s.Name] = true
			}
			for _, n := range names {
				if !known[n] {
					return fmt.Errorf("no custom function %q (verdict jp function lists them)", n)
				}
			}
			for _, s := range sigs {
				if len(names) > 0 && !slices.Contains(names, s.Name) {
					continue
				}
				if _, err := fmt.Fprintf(stdout, "Name: %s\n  Signature: %s\n\n", s.Name, s); err != nil {
					return err
				}
			}
			return nil
		},
	}
}

func newJPParse(stdin io.Reader, stdout io.Writer) *cobra.Command {
	var files []string
	cmd := &cobra.Command{
		Use:   "parse [-f file]... [expression]...",
		Short: "Print the parse tree of JMESPath expressions (read from stdin when none is given)",
		RunE: func(_ *cobra.Command, args []string) error {
			exprs, err := jpExpressions(args, files, "-f", true, stdin)
			if err != nil {
				return err
			}
			for _, expr := range exprs {
				ast, err := jmespath.AST(expr)
				if err != nil {
					return fmt.Errorf("%s: %w", expr, err)
				}
				if _, err := fmt.Fprintf(stdout, "# %s\n%s\n", expr, strings.TrimRight(ast, "\n")); err != nil {
					return err
				}
			}
			return nil
		},
	}
	cmd.Flags().StringSliceVarP(&files, "file", "f", nil, "read an expression from this file")
	return cmd
}

// jpExpressions are the expressions given as arguments, then those read
// from the files of flag; none is an error.
// jpExpressions are the expressions given as arguments and in files;
// with none, and fromStdin, the standard input holds one (as the Kyverno
// CLI reads it when stdin is not the document).
func jpExpressions(args, files []string, flag string, fromStdin bool, stdin io.Reader) ([]string, error) {
	exprs := slices.Clone(args)
	for _, f := range files {
		b, err := readBounded(f, stdin)
		if err != nil {
			return nil, err
		}
		exprs = append(exprs, strings.TrimSpace(string(b)))
	}
	if len(exprs) == 0 && fromStdin && stdin != nil {
		b, err := readBounded("-", stdin)
		if err != nil {
			return nil, err
		}
		if e := strings.TrimSpace(string(b)); e != "" {
			exprs = append(exprs, e)
		}
	}
	if len(exprs) == 0 {
		return nil, fmt.Errorf("no expression: give one as an argument, in a file with %s, or on stdin", flag)
	}
	return exprs, nil
}

// readBounded reads a file ("-": stdin) of at most maxJPInput bytes.
func readBounded(path string, stdin io.Reader) ([]byte, error) {
	r := stdin
	if path != "-" {
		f, err := os.Open(path)
		if err != nil {
			return nil, err
		}
		defer func() { _ = f.Close() }()
		r = f
	}
	b, err := io.ReadAll(io.LimitReader(r, maxJPInput+1))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if len(b) > maxJPInput {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, maxJPInput)
	}
	return b, nil
}
