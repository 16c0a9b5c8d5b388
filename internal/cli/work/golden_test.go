package work

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/nats-io/nats.go"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/testkit/golden"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// goldenNow is the clock of the golden outputs.
var goldenNow = time.Date(2026, 11, 23, 1, 0, 0, 0, time.UTC)

func workSubject(t *testing.T, kind queue.WorkKind, key string) string {
	t.Helper()
	s, err := bus.WorkSubject(kind, key)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// goldenPending is one item of every origin and state: an admission's
// generate item a worker has, a mutate item a policy change made, a
// periodic scan, a cleanup tick a schedule fired that was re-queued from
// a dead letter, and an item no consumer selects whose payload is not
// JSON.
func goldenPending(t *testing.T) []queue.PendingWork {
	return []queue.PendingWork{
		{
			Sequence: 41, Subject: workSubject(t, bus.WorkGenerate, "team-netpol/default-deny/9f0c"), Kind: bus.WorkGenerate,
			Key: "team-netpol/default-deny/9f0c", Published: goldenNow.Add(-3*time.Minute - 12*time.Second),
			Consumer: bus.ConsumerGenerator, Delivered: true,
			Data: []byte(`{"kind":"generate","policy":{"key":"team-netpol","uid":"p1","resourceVersion":"7"},"rule":"default-deny",` +
				`"trigger":{"apiVersion":"v1","kind":"Namespace","name":"team-a","uid":"9f0c"},"operation":"CREATE","requestUid":"r1"}`),
		},
		{
			Sequence: 42, Subject: workSubject(t, bus.WorkMutate, "shop/add-owner/label"), Kind: bus.WorkMutate,
			Key: "shop/add-owner/label", Published: goldenNow.Add(-45 * time.Second), Consumer: bus.ConsumerGenerator,
			Data: []byte(`{"kind":"mutate","policy":{"key":"shop/add-owner"},"rule":"label","cause":"policy","action":"policyChanged"}`),
		},
		{
			Sequence: 57, Subject: workSubject(t, bus.WorkScan, "all"), Kind: bus.WorkScan, Key: "all",
			Published: goldenNow.Add(-2*time.Hour - 5*time.Minute), Consumer: bus.ConsumerScanner,
			Data: []byte(`{"action":"all","reason":"interval","timestamp":"2026-11-22T22:55:00Z"}`),
		},
		{
			Sequence: 60, Subject: workSubject(t, bus.WorkCleanup, "clean-old-pods"), Kind: bus.WorkCleanup, Key: "clean-old-pods",
			Published: goldenNow.Add(-26 * time.Hour), Consumer: bus.ConsumerCleaner,
			Header: nats.Header{headerScheduler: []string{"verdict.schedule.clean-old-pods"}, queue.HeaderRequeued: []string{"7"}},
			Data:   []byte(`{"policy":{"key":"clean-old-pods"}}`),
		},
		{
			Sequence: 61, Subject: workSubject(t, bus.WorkScan, "by hand"), Kind: bus.WorkScan, Key: "by hand",
			Published: goldenNow, Data: []byte("not json"),
		},
	}
}

// goldenDead is a poison generate item, a scan item that ran out of
// attempts, and a message that is not a dead letter.
func goldenDead(t *testing.T) []queue.DeadEntry {
	return []queue.DeadEntry{
		{
			Sequence: 3, Stored: goldenNow.Add(-time.Hour), Kind: bus.WorkGenerate, Key: "team/escape/copy/77aa",
			DeadLetter: queue.DeadLetter{
				Reason:  "poison: namespaceForbidden: generated ConfigMap other/escaped: policy team/escape is namespaced and may generate only into namespace team, not other",
				Subject: workSubject(t, bus.WorkGenerate, "team/escape/copy/77aa"), Stream: bus.StreamWork, Sequence: 12,
				Deliveries: 1, Consumer: bus.ConsumerGenerator, Time: goldenNow.Add(-time.Hour),
				Data: []byte(`{"kind":"generate","policy":{"key":"team/escape"},"rule":"copy","trigger":{"apiVersion":"v1","kind":"ConfigMap","namespace":"team","name":"seed","uid":"77aa"},"operation":"UPDATE"}`),
			},
		},
		{
			Sequence: 4, Stored: goldenNow.Add(-10 * time.Minute), Kind: bus.WorkScan, Key: "policy/require-labels",
			DeadLetter: queue.DeadLetter{
				Reason:  "after 5 deliveries: list pods: the server is currently unable to handle the request",
				Subject: workSubject(t, bus.WorkScan, "policy/require-labels"), Stream: bus.StreamWork, Sequence: 30,
				Deliveries: 5, Consumer: bus.ConsumerScanner, Time: goldenNow.Add(-10 * time.Minute),
				Data: []byte(`{"action":"policy","policy":{"key":"require-labels","uid":"u"},"reason":"created"}`),
			},
		},
		{
			Sequence: 9, Stored: goldenNow.Add(-time.Minute), StoredSubject: "verdict.dead.by-hand",
			DeadLetter: queue.DeadLetter{Data: []byte("?")},
			Invalid:    errors.New("queue: invalid subject: not a dead letter (no origin headers)"),
		},
	}
}

// TestWorkOutputGolden pins the table and JSON of `verdict work list` and
// `verdict work list --dead`, full and empty, with golden files under
// testdata/golden.
func TestWorkOutputGolden(t *testing.T) {
	tests := map[string]struct {
		write func(*bytes.Buffer) error
		file  string
	}{
		"pending table": {file: "work-list.txt", write: func(b *bytes.Buffer) error {
			return writePending(b, "table", goldenNow, goldenPending(t), false)
		}},
		"pending json": {file: "work-list.json", write: func(b *bytes.Buffer) error {
			return writePending(b, "json", goldenNow, goldenPending(t), true)
		}},
		"pending table, none": {file: "work-list-none.txt", write: func(b *bytes.Buffer) error {
			return writePending(b, "table", goldenNow, nil, false)
		}},
		"pending json, none": {file: "work-list-none.json", write: func(b *bytes.Buffer) error {
			return writePending(b, "json", goldenNow, nil, false)
		}},
		"dead table": {file: "work-list-dead.txt", write: func(b *bytes.Buffer) error {
			return writeDead(b, "table", goldenNow, goldenDead(t), false)
		}},
		"dead json": {file: "work-list-dead.json", write: func(b *bytes.Buffer) error {
			return writeDead(b, "json", goldenNow, goldenDead(t), false)
		}},
		"dead table, none": {file: "work-list-dead-none.txt", write: func(b *bytes.Buffer) error {
			return writeDead(b, "table", goldenNow, nil, false)
		}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			var b bytes.Buffer
			if err := tc.write(&b); err != nil {
				t.Fatal(err)
			}
			golden.Assert(t, "testdata/golden/"+tc.file, b.Bytes())
		})
	}
}

func TestAge(t *testing.T) {
	tests := map[time.Duration]string{
		-time.Second:                    "0s",
		0:                               "0s",
		59 * time.Second:                "59s",
		3*time.Minute + 12*time.Second:  "3m12s",
		2*time.Hour + 5*time.Minute + 7: "2h5m",
		26*time.Hour + 59*time.Minute:   "1d2h",
		400 * 24 * time.Hour:            "400d0h",
	}
	for d, want := range tests {
		if got := age(d); got != want {
			t.Errorf("age(%s) = %q, want %q", d, got, want)
		}
	}
}
