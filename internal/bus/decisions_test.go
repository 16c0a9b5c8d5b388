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
// and its id is the same for the same answer to the same request and
// differs for another answer (outcome, patch).
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
	other.Outcome, other.Findings, other.Patch = DecisionPatched, nil, json.RawMessage(`[]`)
	if o, _ := DecisionMessage(other); o.ID == m.ID {
		t.Error("another answer to the same request (a reinvocation's) has the same id")
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

// FuzzEncodeDecision holds EncodeDecision to encoding/json's bytes, the
// optional fields set or not, any strings, patches and times.
func FuzzEncodeDecision(f *testing.F) {
	f.Add("req-1", "team-a", "apps", "web", "alice", "no <latest> & \u2028", `[{"op":"add","path":"/a","value":"<b>"}]`, int64(0), uint8(0xff))
	f.Add("\xff", "", "", "", "", "", "", int64(-1), uint8(0))
	f.Add("r", "n", "g", "x", "u", "m", `not json`, int64(1<<62), uint8(0x55))
	f.Fuzz(func(t *testing.T, uid, ns, group, name, user, msg, patch string, at int64, set uint8) {
		d := Decision{
			RequestUID: uid, Webhook: "validate", Operation: "CREATE", Outcome: DecisionDenied,
			Resource: DecisionResource{Group: group, Version: "v1", Kind: "Pod", Resource: "pods", Namespace: ns, Name: name},
			User:     DecisionUser{Username: user},
			Time:     time.Unix(0, at).In(time.FixedZone("z", int(at%100000))),
		}
		if set&1 != 0 {
			d.User.UID, d.User.Groups = uid, []string{user, msg}
		}
		if set&2 != 0 {
			d.Message, d.DryRun, d.Truncated, d.Replica, d.Verified = msg, true, true, name, true
		}
		if set&4 != 0 {
			d.Findings = []Finding{{Policy: name, Rule: user, Action: ActionDeny, Message: msg}, {Policy: ns, Action: ActionWarn}}
		}
		if set&8 != 0 {
			d.Patch, d.PatchBytes = json.RawMessage(patch), len(patch)
		}
		if set&16 != 0 {
			d.Resource.SubResource, d.Resource.UID = msg, uid
		}
		if set&32 != 0 {
			d.Object, d.ObjectOmitted = json.RawMessage(patch), msg
		}
		got, err := EncodeDecision(d)
		want, werr := json.Marshal(d)
		if (err == nil) != (werr == nil) || (err == nil && string(got) != string(want)) {
			t.Fatalf("EncodeDecision = %s, %v\nwant %s, %v", got, err, want, werr)
		}
	})
}

// BenchmarkDecisionMessage: the admission log's cost per admission
// before the publisher: a warned Pod's decision, 19 findings (the Audit
// policies of the Pod Security benchmark), encoded with its id.
//
//	go test -run '^$' -bench DecisionMessage -benchmem ./internal/bus/
func BenchmarkDecisionMessage(b *testing.B) {
	d := testDecision()
	d.Outcome, d.Message = DecisionWarned, ""
	for i := range 19 {
		d.Findings = append(d.Findings, Finding{Policy: fmt.Sprint("disallow-capabilities-", i), Rule: "adding-capabilities", Action: ActionWarn,
			Message: "validation error: Any capabilities added beyond the allowed list (AUDIT_WRITE, CHOWN, DAC_OVERRIDE, FOWNER) are disallowed."})
	}
	b.Run("encoder=direct", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := DecisionMessage(d); err != nil {
				b.Fatal(err)
			}
		}
	})
	// The same with encoding/json, as the first version made it.
	b.Run("encoder=encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			d.Bound()
			if err := d.check(); err != nil {
				b.Fatal(err)
			}
			if _, err := json.Marshal(d); err != nil {
				b.Fatal(err)
			}
			_ = queue.MsgID("decision", d.RequestUID, d.Webhook, d.Outcome, string(d.Patch))
		}
	})
}
