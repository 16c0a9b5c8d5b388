package bus

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/verdict-dev/verdict/pkg/queue"
)

func testDecision() Decision {
	return Decision{
		RequestUID: "req-1", Webhook: "validate", Operation: "CREATE",
		Resource: DecisionResource{Version: "v1", Kind: "Pod", Resource: "pods", Namespace: "team.a", Name: "web"},
		User:     DecisionUser{Username: "alice", Groups: []string{"devs", "system:authenticated"}},
		Outcome:  DecisionDenied, Message: "blocked",
		Findings: []Finding{{Policy: "disallow-latest", Rule: "tag", Action: ActionDeny, Message: "no latest"}},
		Time:     time.Date(2026, 11, 28, 10, 0, 0, 0, time.UTC),
	}
}

// TestDecisionMessage: a decision goes to its namespace's and outcome's
// subject (the namespace encoded as a token; cluster-scoped resources
// under @cluster, which no namespace can be), decodes back to itself,
// and its id is the same for the same answer and differs for another.
func TestDecisionMessage(t *testing.T) {
	d := testDecision()
	m, err := DecisionMessage(d)
	if err != nil {
		t.Fatal(err)
	}
	if want := "verdict.decisions." + queue.EncodeToken("team.a") + ".denied"; m.Subject != want {
		t.Errorf("subject %s, want %s", m.Subject, want)
	}
	got, err := DecodeDecision(m.Subject, m.Data)
	if err != nil {
		t.Fatal(err)
	}
	a, _ := json.Marshal(got)
	b, _ := json.Marshal(d)
	if string(a) != string(b) {
		t.Errorf("round trip\n%s\nwant\n%s", a, b)
	}
	again, _ := DecisionMessage(d)
	if again.ID != m.ID {
		t.Error("the same decision has two ids")
	}
	other := d
	other.Findings = []Finding{{Policy: "disallow-latest", Rule: "tag", Action: ActionDeny, Message: "other"}}
	if o, _ := DecisionMessage(other); o.ID == m.ID {
		t.Error("another answer to the same request has the same id")
	}

	cluster := d
	cluster.Resource.Namespace = ""
	cm, err := DecisionMessage(cluster)
	if err != nil {
		t.Fatal(err)
	}
	if cm.Subject != "verdict.decisions.@cluster.denied" {
		t.Errorf("cluster-scoped subject %s", cm.Subject)
	}
	for filter, subjects := range map[string][]string{
		DecisionsFilter("", ""):                        {m.Subject, cm.Subject},
		DecisionsFilter("team.a", ""):                  {m.Subject},
		DecisionsFilter(ClusterScoped, DecisionDenied): {cm.Subject},
		DecisionsFilter("", DecisionAllowed):           nil,
	} {
		for _, s := range []string{m.Subject, cm.Subject} {
			want := strings.Contains(strings.Join(subjects, " "), s)
			if got := subjectMatches(filter, s); got != want {
				t.Errorf("filter %s on %s: %v, want %v", filter, s, got, want)
			}
		}
	}
}

// subjectMatches is NATS's matching of a filter with * wildcards.
func subjectMatches(filter, subject string) bool {
	f, s := strings.Split(filter, "."), strings.Split(subject, ".")
	if len(f) != len(s) {
		return false
	}
	for i := range f {
		if f[i] != "*" && f[i] != s[i] {
			return false
		}
	}
	return true
}

// TestDecisionBounds: a decision past the bounds is cut and says so, on
// rune boundaries, and a large patch is left out with its size kept.
func TestDecisionBounds(t *testing.T) {
	d := testDecision()
	for i := range MaxDecisionFindings + 5 {
		d.Findings = append(d.Findings, Finding{Policy: fmt.Sprint("p", i), Action: ActionWarn, Message: strings.Repeat("é", MaxFindingMessage)})
	}
	d.Patch = json.RawMessage(`[{"op":"add","path":"/x","value":"` + strings.Repeat("a", MaxDecisionPatch) + `"}]`)
	size := len(d.Patch)
	m, err := DecisionMessage(d)
	if err != nil {
		t.Fatal(err)
	}
	got, err := DecodeDecision(m.Subject, m.Data)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Truncated || len(got.Findings) != MaxDecisionFindings || got.Patch != nil || got.PatchBytes != size {
		t.Fatalf("truncated %v, %d findings, patch %d bytes of %d", got.Truncated, len(got.Findings), len(got.Patch), got.PatchBytes)
	}
	for _, f := range got.Findings {
		if len(f.Message) > MaxFindingMessage || strings.ContainsRune(f.Message, '\uFFFD') {
			t.Fatalf("message of %d bytes, or cut inside a rune", len(f.Message))
		}
	}
}

// TestDecisionRefused: what is not a decision its subject describes is
// refused, with the reason: a message moved to another namespace's or
// outcome's subject (a reader filtering by subject would show a forged
// entry), and incomplete or unknown outcomes.
func TestDecisionRefused(t *testing.T) {
	m, err := DecisionMessage(testDecision())
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		subject string
		data    string
		want    string
	}{
		"another namespace": {subject: DecisionSubject("team-b", DecisionDenied), data: string(m.Data), want: "subject"},
		"another outcome":   {subject: DecisionSubject("team.a", DecisionAllowed), data: string(m.Data), want: "subject"},
		"not json":          {subject: m.Subject, data: "{", want: "invalid decision"},
		"no request":        {subject: m.Subject, data: strings.Replace(string(m.Data), `"requestUid":"req-1"`, `"requestUid":""`, 1), want: "no request uid"},
		"unknown outcome":   {subject: DecisionSubject("team.a", "maybe"), data: strings.Replace(string(m.Data), `"outcome":"denied"`, `"outcome":"maybe"`, 1), want: `outcome "maybe"`},
		"unknown action":    {subject: m.Subject, data: strings.Replace(string(m.Data), `"action":"deny"`, `"action":"delete"`, 1), want: `action "delete"`},
		"too large":         {subject: m.Subject, data: strings.Repeat(" ", maxDecisionBytes+1), want: "bytes"},
	} {
		t.Run(name, func(t *testing.T) {
			_, err := DecodeDecision(tc.subject, []byte(tc.data))
			if !errors.Is(err, ErrInvalidDecision) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("%v, want ErrInvalidDecision naming %q", err, tc.want)
			}
		})
	}
	if _, err := DecisionMessage(Decision{}); !errors.Is(err, ErrInvalidDecision) {
		t.Fatalf("an empty decision made a message: %v", err)
	}
}

// TestDecisionsRetention: VERDICT_DECISIONS, provisioned with a size
// limit, keeps taking decisions past it and lets the oldest go (a flood
// of admissions never stops the log, nor is refused), and the same
// decision published twice is stored once.
func TestDecisionsRetention(t *testing.T) {
	srv := runServer(t)
	c := connect(t, srv.ClientURL())
	const limit = 1 << 20
	provision(t, c, WithConsumers(), WithDecisionsMaxBytes(limit), WithDecisionsMaxAge(time.Hour))
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	d := testDecision()
	d.Message = strings.Repeat("x", 900)
	const n = 3000 // about 3 MiB
	for i := range n {
		d.RequestUID = fmt.Sprint("req-", i)
		m, err := DecisionMessage(d)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.PublishSync(ctx, m); err != nil {
			t.Fatalf("decision %d refused: %v", i, err)
		}
	}
	m, _ := DecisionMessage(d)
	if _, err := c.PublishSync(ctx, m); err != nil {
		t.Fatal(err)
	}
	s, err := c.JetStream().Stream(ctx, StreamDecisions)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	st := info.State
	if st.Bytes > limit || st.FirstSeq == 1 || st.LastSeq != n || st.Msgs == 0 {
		t.Fatalf("stream state: %d bytes of %d, sequences %d to %d, %d messages", st.Bytes, limit, st.FirstSeq, st.LastSeq, st.Msgs)
	}
	if info.Config.Discard != jetstream.DiscardOld || info.Config.MaxAge != time.Hour {
		t.Fatalf("config: discard %v, max age %s", info.Config.Discard, info.Config.MaxAge)
	}
	t.Logf("%d decisions published, %d kept (%d bytes), the first %d gone", n, st.Msgs, st.Bytes, st.FirstSeq-1)
}
