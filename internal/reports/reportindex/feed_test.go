package reportindex_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/platform/apicheck"
	"github.com/verdict-dev/verdict/internal/reports/reporter/reportertest"
	"github.com/verdict-dev/verdict/internal/reports/reportindex"
	"github.com/verdict-dev/verdict/pkg/engine"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// TestFeed: against a real API server and JetStream, a feed folds the
// results of real objects into the index and becomes ready once it has
// read what the stream held; a forged result (no such object) and a
// message that is no result are left out and counted; a result
// published later changes the report live, and a subscriber hears of it.
func TestFeed(t *testing.T) {
	e := reportertest.NewEnv(t)
	ns := e.Namespace("index-")
	cms := e.CreateConfigMaps(ns.Name, 3)
	for i, cm := range cms {
		e.Publish(reportertest.Evaluation{Ref: reportertest.RefOf("v1", "ConfigMap", cm), Policy: "require-labels", Version: "1", Request: cm.Name, Scored: true,
			Rules: reportertest.Rules(engine.StatusPass, []engine.Status{engine.StatusPass, engine.StatusFail, engine.StatusWarn}[i])}.Event())
	}
	forged := bus.ResourceRef{APIVersion: "v1", Kind: "ConfigMap", Namespace: ns.Name, Name: "ghost", UID: "00000000-0000-0000-0000-000000000001"}
	e.Publish(reportertest.Evaluation{Ref: forged, Policy: "require-labels", Version: "1", Request: "forged", Rules: reportertest.Rules(engine.StatusFail)}.Event())
	if _, err := e.Conn.PublishSync(t.Context(), queue.Message{Subject: bus.ResultSubject("not-a-uid", "p"), ID: "garbage", Data: []byte("not a result")}); err != nil {
		t.Fatal(err)
	}
	want := e.Expected()

	x := reportindex.New()
	f := reportindex.NewFeed(x, e.Connect(), e.Checker(apicheck.WithGrace(time.Second)), zerolog.Nop())
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- f.Run(ctx) }()
	select {
	case <-f.Ready():
	case err := <-done:
		t.Fatalf("feed ended: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatalf("not ready: %+v", f.Stats())
	}
	if st := f.Stats(); st.Read != 5 || st.Applied != 3 || st.Rejected != 1 || st.Undecodable != 1 || st.Pending != 0 {
		t.Fatalf("stats %+v", st)
	}
	for _, cm := range cms {
		got, ok := x.Report(string(cm.UID))
		if !ok {
			t.Fatalf("no report for %s", cm.Name)
		}
		if err := reportertest.Matches(got.Object, want[string(cm.UID)]); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := x.Report(forged.UID); ok {
		t.Fatal("the forged result made a report")
	}

	sub, err := x.Subscribe(x.Version())
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	e.Publish(reportertest.Evaluation{Ref: reportertest.RefOf("v1", "ConfigMap", cms[0]), Policy: "require-labels", Version: "2", Request: "again", Scored: true,
		Rules: reportertest.Rules(engine.StatusFail, engine.StatusFail)}.Event())
	select {
	case ch := <-sub.C:
		if ch.Type != reportindex.Modified || ch.UID != string(cms[0].UID) || ch.Namespace != ns.Name {
			t.Fatalf("change %+v", ch)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("no change for the new result")
	}
	got, _ := x.Report(string(cms[0].UID))
	if err := reportertest.SummaryIs(got.Object, 0, 2, 0, 0, 0); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("feed ended with %v", err)
	}
}
