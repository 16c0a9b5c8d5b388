package cli

import (
	"encoding/json"
	"encoding/xml"
	"fmt"
	"io"
	"strings"

	"github.com/verdict-dev/verdict/pkg/engine/wildcard"
)

// Test output formats (--output-format, Kyverno's flag): text is the
// default, one line per failure and the summary.
const (
	testOutputText     = "text"
	testOutputJSON     = "json"
	testOutputYAML     = "yaml"
	testOutputJUnit    = "junit"
	testOutputMarkdown = "markdown"
)

// testOutputs lists the formats --output-format takes.
var testOutputs = []string{testOutputText, testOutputJSON, testOutputYAML, testOutputJUnit, testOutputMarkdown}

// caseSelector is --test-case-selector, as Kyverno's CLI reads it:
// "policy=<pattern>,rule=<pattern>,resource=<pattern>", each optional,
// with * and ? wildcards. An assertion is run when every pattern given
// matches it; one whose rule is empty (a CEL policy's) is matched by
// any rule pattern.
type caseSelector struct {
	policy, rule, resource string
}

// parseCaseSelector reads a selector; an empty one selects everything.
func parseCaseSelector(in string) (caseSelector, error) {
	sel := caseSelector{policy: "*", rule: "*", resource: "*"}
	if strings.TrimSpace(in) == "" {
		return sel, nil
	}
	for _, part := range strings.Split(in, ",") {
		key, value, ok := strings.Cut(part, "=")
		key, value = strings.TrimSpace(key), strings.TrimSpace(value)
		if !ok || strings.Contains(value, "=") {
			return sel, fmt.Errorf("--test-case-selector %q: each part is <key>=<pattern>", part)
		}
		switch key {
		case "policy":
			sel.policy = value
		case "rule":
			sel.rule = value
		case "resource":
			sel.resource = value
		default:
			return sel, fmt.Errorf("--test-case-selector %q: the keys are policy, rule and resource", part)
		}
	}
	return sel, nil
}

// selects reports whether the selector keeps an assertion.
func (s caseSelector) selects(a assertion) bool {
	return wildcard.Match(s.policy, a.Policy) &&
		(a.Rule == "" || wildcard.Match(s.rule, a.Rule)) &&
		(a.Resource == "" || wildcard.Match(s.resource, a.Resource))
}

// writeTestSummary writes a summary in a structured format.
func writeTestSummary(w io.Writer, format string, sum *TestSummary, files int) error {
	switch format {
	case testOutputJSON:
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(sum)
	case testOutputYAML:
		b, err := yamlMarshal(sum)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	case testOutputJUnit:
		return writeJUnit(w, sum)
	case testOutputMarkdown:
		return writeMarkdown(w, sum, files)
	}
	return fmt.Errorf("output format %q", format)
}

// The JUnit XML elements CI systems read: one testsuite per test file,
// one testcase per assertion (a failure element when it failed, skipped
// when unsupported or skipped), and an error testcase per test file that
// could not be run.
type junitSuites struct {
	XMLName  xml.Name     `xml:"testsuites"`
	Name     string       `xml:"name,attr"`
	Tests    int          `xml:"tests,attr"`
	Failures int          `xml:"failures,attr"`
	Errors   int          `xml:"errors,attr"`
	Skipped  int          `xml:"skipped,attr"`
	Suites   []junitSuite `xml:"testsuite"`
}

type junitSuite struct {
	Name     string      `xml:"name,attr"`
	Tests    int         `xml:"tests,attr"`
	Failures int         `xml:"failures,attr"`
	Errors   int         `xml:"errors,attr"`
	Skipped  int         `xml:"skipped,attr"`
	Cases    []junitCase `xml:"testcase"`
}

type junitCase struct {
	Name      string        `xml:"name,attr"`
	Classname string        `xml:"classname,attr"`
	Failure   *junitMessage `xml:"failure,omitempty"`
	Error     *junitMessage `xml:"error,omitempty"`
	Skipped   *junitMessage `xml:"skipped,omitempty"`
}

type junitMessage struct {
	Message string `xml:"message,attr"`
	Text    string `xml:",chardata"`
}

// writeJUnit writes the assertions as JUnit XML (the summary must hold
// them all: RunTests keeps them for this format).
func writeJUnit(w io.Writer, sum *TestSummary) error {
	out := junitSuites{Name: "verdict test"}
	index := map[string]int{}
	suite := func(name string) *junitSuite {
		i, ok := index[name]
		if !ok {
			i = len(out.Suites)
			index[name] = i
			out.Suites = append(out.Suites, junitSuite{Name: name})
		}
		return &out.Suites[i]
	}
	for _, a := range sum.Assertions {
		s := suite(a.Test)
		c := junitCase{Name: caseName(a), Classname: a.Policy}
		s.Tests++
		switch a.Outcome {
		case "failed":
			s.Failures++
			c.Failure = &junitMessage{Message: a.Reason, Text: fmt.Sprintf("want %s, got %s: %s", a.Expected, a.Actual, a.Message)}
		case "unsupported", "skipped":
			s.Skipped++
			c.Skipped = &junitMessage{Message: a.Reason}
		}
		s.Cases = append(s.Cases, c)
	}
	for _, e := range sum.Errors {
		name, detail, _ := strings.Cut(e, ": ")
		s := suite(name)
		s.Tests++
		s.Errors++
		s.Cases = append(s.Cases, junitCase{Name: "load", Classname: name, Error: &junitMessage{Message: "the test could not be run", Text: detail}})
	}
	for _, s := range out.Suites {
		out.Tests += s.Tests
		out.Failures += s.Failures
		out.Errors += s.Errors
		out.Skipped += s.Skipped
	}
	if _, err := io.WriteString(w, xml.Header); err != nil {
		return err
	}
	enc := xml.NewEncoder(w)
	enc.Indent("", "  ")
	if err := enc.Encode(out); err != nil {
		return err
	}
	_, err := io.WriteString(w, "\n")
	return err
}

// caseName names an assertion: its policy, rule and resource.
func caseName(a assertion) string {
	name := a.Policy
	if a.Rule != "" {
		name += "/" + a.Rule
	}
	return name + " " + a.Resource
}

// writeMarkdown writes the assertions as a Markdown table and the
// summary line.
func writeMarkdown(w io.Writer, sum *TestSummary, files int) error {
	var b strings.Builder
	b.WriteString("| test | policy | rule | resource | want | got | outcome |\n|---|---|---|---|---|---|---|\n")
	cell := func(s string) string { return strings.ReplaceAll(oneLine(s), "|", `\|`) }
	for _, a := range sum.Assertions {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", cell(a.Test), cell(a.Policy), cell(a.Rule), cell(a.Resource), cell(a.Expected), cell(a.Actual), cell(a.Outcome))
	}
	for _, e := range sum.Errors {
		fmt.Fprintf(&b, "\nError: %s\n", cell(e))
	}
	fmt.Fprintf(&b, "\n%d test files: %d passed, %d failed, %d skipped, %d unsupported, %d errors\n", files, sum.Passed, sum.Failed, sum.Skipped, sum.Unsupported, len(sum.Errors))
	_, err := io.WriteString(w, b.String())
	return err
}
