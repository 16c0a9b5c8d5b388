package decisions

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/verdict-dev/verdict/internal/bus"
)

// maxMessage is the most characters of the MESSAGE column.
const maxMessage = 80

// printer writes decisions as a table or as JSON lines.
type printer struct {
	json bool
	w    io.Writer
	tw   *tabwriter.Writer
	now  func() time.Time
}

func newPrinter(output string, w io.Writer, now func() time.Time) *printer {
	p := &printer{json: output == "json", w: w, now: now}
	if !p.json {
		p.tw = tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	}
	return p
}

// header writes the table's header.
func (p *printer) header() {
	if p.json {
		return
	}
	fmt.Fprintln(p.tw, "TIME\tOUTCOME\tOPERATION\tKIND\tNAMESPACE\tNAME\tUSER\tPOLICIES\tMESSAGE")
}

// flush writes the rows so far, aligned among themselves.
func (p *printer) flush() error {
	if p.json {
		return nil
	}
	return p.tw.Flush()
}

// print writes one decision (a table's row once flushed).
func (p *printer) print(d bus.Decision) error {
	if p.json {
		b, err := json.Marshal(d)
		if err != nil {
			return err
		}
		_, err = fmt.Fprintf(p.w, "%s\n", b)
		return err
	}
	r := d.Resource
	kind := r.Kind
	if r.SubResource != "" {
		kind += "/" + r.SubResource
	}
	op := d.Operation
	if d.DryRun {
		op += " (dry run)"
	}
	fmt.Fprintf(p.tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n",
		d.Time.UTC().Format(time.RFC3339), d.Outcome, op, kind, dash(r.Namespace), dash(r.Name),
		dash(d.User.Username), dash(policies(d.Findings)), dash(message(d)))
	return nil
}

// policies names the findings' policies and rules, each once, in order:
// "policy (rule)", a policy key holding a namespace and a kind already.
func policies(fs []bus.Finding) string {
	var out []string
	seen := map[string]bool{}
	for _, f := range fs {
		name := f.Policy
		if f.Rule != "" {
			name += " (" + f.Rule + ")"
		}
		if !seen[name] {
			seen[name] = true
			out = append(out, name)
		}
	}
	return strings.Join(out, ", ")
}

// message is the first finding's message that denied or warned, on one
// line and cut to maxMessage.
func message(d bus.Decision) string {
	for _, f := range d.Findings {
		if f.Action != bus.ActionMutate && f.Message != "" {
			return oneLine(f.Message)
		}
	}
	return ""
}

func oneLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if r := []rune(s); len(r) > maxMessage {
		s = string(r[:maxMessage-1]) + "…"
	}
	return s
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}
