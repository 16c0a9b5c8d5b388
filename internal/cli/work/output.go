package work

import (
	"encoding/json"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// PendingView is one pending item as `verdict work list -o json` writes it.
type PendingView struct {
	Sequence  uint64    `json:"sequence"`
	Subject   string    `json:"subject"`
	Kind      string    `json:"kind,omitempty"`
	Key       string    `json:"key,omitempty"`
	Published time.Time `json:"published"`
	// Consumer takes the item ("" none does); State is waiting,
	// delivered, or unconsumed when no consumer selects it.
	Consumer string `json:"consumer,omitempty"`
	State    string `json:"state"`
	ItemView
}

// DeadView is one dead letter as `verdict work list --dead -o json`
// writes it.
type DeadView struct {
	Sequence uint64 `json:"sequence"` // in VERDICT_DEAD: what retry takes
	// Subject, Stream and OriginSequence are where it came from.
	Subject        string    `json:"subject"`
	Stream         string    `json:"stream,omitempty"`
	OriginSequence uint64    `json:"originSequence,omitempty"`
	Kind           string    `json:"kind,omitempty"`
	Key            string    `json:"key,omitempty"`
	Reason         string    `json:"reason"`
	Attempts       uint64    `json:"attempts"`
	Consumer       string    `json:"consumer,omitempty"`
	Time           time.Time `json:"time"`
	ItemView
	// Invalid says why the message is not a dead letter a runner wrote.
	Invalid string `json:"invalid,omitempty"`
}

// ItemView is what a work item's payload and headers say about it.
type ItemView struct {
	Policy  string `json:"policy,omitempty"`
	Rule    string `json:"rule,omitempty"`
	Trigger string `json:"trigger,omitempty"`
	Origin  string `json:"origin,omitempty"`
}

// listView is the JSON document of `verdict work list`.
type listView[T any] struct {
	Stream string `json:"stream"`
	Items  []T    `json:"items"`
	// More: there are more than --limit; the oldest are listed.
	More bool `json:"more"`
}

// Pending item states.
const (
	StateWaiting    = "waiting"
	StateDelivered  = "delivered"
	StateUnconsumed = "unconsumed"
)

func pendingViewOf(p queue.PendingWork) PendingView {
	v := PendingView{Sequence: p.Sequence, Subject: p.Subject, Kind: string(p.Kind), Key: p.Key,
		Published: p.Published.UTC(), Consumer: p.Consumer, ItemView: itemViewOf(p.Header, p.Data)}
	switch {
	case p.Consumer == "":
		v.State = StateUnconsumed
	case p.Delivered:
		v.State = StateDelivered
	default:
		v.State = StateWaiting
	}
	return v
}

func deadViewOf(d queue.DeadEntry) DeadView {
	v := DeadView{Sequence: d.Sequence, Subject: d.Subject, Stream: d.Stream, OriginSequence: d.DeadLetter.Sequence,
		Kind: string(d.Kind), Key: d.Key, Reason: d.Reason, Attempts: d.Deliveries, Consumer: d.Consumer,
		Time: d.Time.UTC(), ItemView: itemViewOf(d.Header, d.Data)}
	if d.Invalid != nil {
		v.Invalid = d.Invalid.Error()
		if v.Subject == "" {
			v.Subject = d.StoredSubject
		}
		if v.Time.IsZero() {
			v.Time = d.Stored.UTC()
		}
	}
	return v
}

// workPayload is what `verdict work list` reads of a payload: the fields
// of events.WorkItem and events.ScanItem (and of any item with the same
// names) that say what the item is about and where it came from.
type workPayload struct {
	Policy     bus.PolicyRef   `json:"policy"`
	Rule       string          `json:"rule"`
	Trigger    bus.ResourceRef `json:"trigger"`
	Resource   bus.ResourceRef `json:"resource"`
	Operation  string          `json:"operation"`
	Cause      string          `json:"cause"`
	Action     string          `json:"action"`
	Reason     string          `json:"reason"`
	RequestUID string          `json:"requestUid"`
}

// headerScheduler is the header JetStream sets on a message a schedule
// fired: the schedule's subject.
const headerScheduler = "Nats-Scheduler"

// itemViewOf reads the policy, rule, trigger and origin of an item from
// its payload (JSON; anything else says nothing) and headers.
func itemViewOf(h nats.Header, data []byte) ItemView {
	var p workPayload
	_ = json.Unmarshal(data, &p) // best effort: an item that is not JSON shows its subject and key only
	v := ItemView{Policy: p.Policy.Key, Rule: p.Rule, Trigger: refString(p.Trigger)}
	if v.Trigger == "" {
		v.Trigger = refString(p.Resource)
	}
	var origin []string
	switch {
	case p.Cause != "":
		origin = append(origin, p.Cause)
	case p.Operation != "":
		origin = append(origin, "admission")
	}
	if p.Operation != "" {
		origin = append(origin, p.Operation)
	}
	if p.Action != "" && p.Action != "apply" {
		origin = append(origin, p.Action)
	}
	if s := h.Get(headerScheduler); s != "" {
		origin = append(origin, "schedule "+s)
	}
	if p.Reason != "" {
		if len(origin) > 0 {
			origin = append(origin, "("+p.Reason+")")
		} else {
			origin = append(origin, p.Reason)
		}
	}
	v.Origin = strings.Join(origin, " ")
	if seq := h.Get(queue.HeaderRequeued); seq != "" {
		if v.Origin != "" {
			v.Origin += ", "
		}
		v.Origin += "re-queued from dead letter " + seq
	}
	return v
}

// refString is Kind/namespace/name, as `verdict apply` names resources.
func refString(r bus.ResourceRef) string {
	switch {
	case r.Name == "":
		return ""
	case r.Namespace == "":
		return r.Kind + "/" + r.Name
	}
	return r.Kind + "/" + r.Namespace + "/" + r.Name
}

// writePending writes pending work as a table (ages relative to now) or
// JSON.
func writePending(w io.Writer, output string, now time.Time, items []queue.PendingWork, more bool) error {
	views := make([]PendingView, len(items))
	for i, it := range items {
		views[i] = pendingViewOf(it)
	}
	if output == "json" {
		return writeJSON(w, listView[PendingView]{Stream: bus.StreamWork, Items: views, More: more})
	}
	if len(views) == 0 {
		_, err := fmt.Fprintf(w, "No pending work in %s.\n", bus.StreamWork)
		return err
	}
	t := newTable(w, "SEQ", "KIND", "KEY", "AGE", "STATE", "POLICY", "RULE", "TRIGGER", "ORIGIN")
	for _, v := range views {
		state := v.State
		if v.Consumer != "" {
			state += " (" + v.Consumer + ")"
		}
		t.row(strconv.FormatUint(v.Sequence, 10), v.Kind, v.Key, age(now.Sub(v.Published)), state, v.Policy, v.Rule, v.Trigger, v.Origin)
	}
	return t.flush()
}

// writeDead writes dead letters as a table or JSON.
func writeDead(w io.Writer, output string, _ time.Time, entries []queue.DeadEntry, more bool) error {
	views := make([]DeadView, len(entries))
	for i, e := range entries {
		views[i] = deadViewOf(e)
	}
	if output == "json" {
		return writeJSON(w, listView[DeadView]{Stream: bus.StreamDead, Items: views, More: more})
	}
	if len(views) == 0 {
		_, err := fmt.Fprintf(w, "No dead letters in %s.\n", bus.StreamDead)
		return err
	}
	t := newTable(w, "SEQ", "TIME", "ATTEMPTS", "CONSUMER", "SUBJECT", "REASON")
	for _, v := range views {
		reason := v.Reason
		if v.Invalid != "" {
			reason = "(" + v.Invalid + ")"
		}
		t.row(strconv.FormatUint(v.Sequence, 10), v.Time.Format(time.RFC3339), strconv.FormatUint(v.Attempts, 10), v.Consumer, v.Subject, reason)
	}
	return t.flush()
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// table writes aligned columns (padding 2, the last one not padded); an
// empty cell is "-". The first write error is kept for flush.
type table struct {
	tw  *tabwriter.Writer
	err error
}

func newTable(w io.Writer, header ...string) *table {
	t := &table{tw: tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)}
	t.row(header...)
	return t
}

func (t *table) row(cells ...string) {
	for i, c := range cells {
		if c = strings.Join(strings.Fields(c), " "); c == "" {
			c = "-"
		}
		cells[i] = c
	}
	if t.err == nil {
		_, t.err = io.WriteString(t.tw, strings.Join(cells, "\t")+"\n")
	}
}

func (t *table) flush() error {
	if t.err != nil {
		return t.err
	}
	return t.tw.Flush()
}

// age is a duration as a short age: 45s, 3m12s, 2h5m, 3d4h.
func age(d time.Duration) string {
	if d < 0 {
		d = 0
	}
	s := int64(d / time.Second)
	switch {
	case s < 60:
		return fmt.Sprintf("%ds", s)
	case s < 3600:
		return fmt.Sprintf("%dm%ds", s/60, s%60)
	case s < 86400:
		return fmt.Sprintf("%dh%dm", s/3600, s%3600/60)
	}
	return fmt.Sprintf("%dd%dh", s/86400, s%86400/3600)
}
