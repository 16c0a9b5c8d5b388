package reportindex_test

import (
	"bytes"
	"context"
	"reflect"
	"testing"
	"time"

	"github.com/rs/zerolog"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/discovery/cached/memory"
	"k8s.io/client-go/restmapper"

	"github.com/verdict-dev/verdict/internal/bus"
	"github.com/verdict-dev/verdict/internal/reports/reporter/reportertest"
	"github.com/verdict-dev/verdict/internal/reports/reportindex"
	"github.com/verdict-dev/verdict/pkg/engine"
)

// TestFeedSnapshot: a replica starting from a snapshot reads only the
// stream after it, leaves out a resource deleted since the snapshot was
// taken (checked against the API server as a stream result is), and
// serves, field for field, what a replica folding the whole stream
// serves; a snapshot that cannot be read, or is of an earlier
// incarnation of the stream, is counted, the stream is then read in
// full, and a snapshot of the stream as it is replaces the stale one.
func TestFeedSnapshot(t *testing.T) {
	e := reportertest.NewEnv(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	if err := e.Conn.ProvisionSnapshots(ctx, 1, 64<<20); err != nil {
		t.Fatal(err)
	}
	ns := e.Namespace("snapshot-")
	cms := e.CreateConfigMaps(ns.Name, 4)
	eval := func(i int, policy, version string, st ...engine.Status) {
		e.Publish(reportertest.Evaluation{Ref: reportertest.RefOf("v1", "ConfigMap", cms[i]), Policy: policy, Version: version,
			Request: cms[i].Name + policy + version, Scored: true, Rules: reportertest.Rules(st...)}.Event())
	}
	for i := range cms {
		eval(i, "p", "1", engine.StatusPass)
		eval(i, "q", "1", engine.StatusFail, engine.StatusPass)
	}
	conn := e.Connect()
	start := func(opts ...reportindex.FeedOption) (*reportindex.Index, *reportindex.Feed) {
		t.Helper()
		x := reportindex.New()
		mapper := restmapper.NewDeferredDiscoveryRESTMapper(memory.NewMemCacheClient(e.Kube.Discovery()))
		check := reportindex.NewCluster(ctx, e.Meta, mapper, reportindex.WithClusterGrace(2*time.Second), reportindex.WithGone(func(uid string) { x.Forget(uid) }))
		f := reportindex.NewFeed(x, conn, check, zerolog.Nop(), opts...)
		go func() { _ = f.Run(ctx) }()
		select {
		case <-f.Ready():
		case <-time.After(30 * time.Second):
			t.Fatalf("not ready: %+v", f.Stats())
		}
		return x, f
	}
	_, a := start(reportindex.WithSnapshots("index", 0))
	snap, err := a.WriteSnapshot(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if snap.Sequence != 8 {
		t.Fatalf("snapshot at %d, want 8", snap.Sequence)
	}
	// After the snapshot: a new evaluation, a resource deleted, a new one.
	eval(0, "p", "2", engine.StatusFail)
	if err := e.Kube.CoreV1().ConfigMaps(ns.Name).Delete(ctx, cms[1].Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	cms = append(cms, e.CreateConfigMaps(e.Namespace("snapshot-later-").Name, 1)...)
	eval(4, "p", "1", engine.StatusWarn)

	b, fb := start(reportindex.WithSnapshots("index", 0))
	full, ff := start()
	if st := fb.Stats(); st.Loaded != 6 || st.Read != 2 || st.Applied != 2 || st.Rejected != 2 || st.SnapshotLoadFailures != 0 {
		t.Fatalf("from the snapshot: %+v (want 6 results loaded, 2 of the deleted resource left out, 2 read)", st)
	}
	if st := ff.Stats(); st.Read != 10 || st.Loaded != 0 {
		t.Fatalf("full read: %+v", st)
	}
	sameReports(t, b, full, 4)

	// A snapshot that is not one: counted, and the stream read in full.
	if _, err := e.Conn.PutSnapshot(ctx, "damaged", bus.StreamResults, 9, bytes.NewReader([]byte("VRIX\x01garbage"))); err != nil {
		t.Fatal(err)
	}
	d, fd := start(reportindex.WithSnapshots("damaged", 0))
	if st := fd.Stats(); st.SnapshotLoadFailures != 1 || st.Loaded != 0 || st.Read != 10 {
		t.Fatalf("damaged snapshot: %+v", st)
	}
	sameReports(t, d, full, 4)

	// The stream deleted and made again: its snapshot is of the old one.
	// A replica reads the new stream in full, and stores a snapshot of it
	// at its first chance, whatever sequence the stale one had reached.
	if err := e.Conn.JetStream().DeleteStream(ctx, bus.StreamResults); err != nil {
		t.Fatal(err)
	}
	if err := bus.Provision(ctx, e.Conn); err != nil {
		t.Fatal(err)
	}
	eval(0, "p", "3", engine.StatusPass)
	_, fe := start(reportindex.WithSnapshots("index", 300*time.Millisecond))
	if st := fe.Stats(); st.SnapshotLoadFailures != 1 || st.Loaded != 0 || st.Read != 1 {
		t.Fatalf("stale snapshot: %+v", st)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		s, err := e.Conn.StatSnapshot(ctx, "index", bus.StreamResults)
		if err == nil && s.Sequence == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no snapshot of the new stream: %+v, %v (%+v)", s, err, fe.Stats())
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sameReports fails unless a and b list the same n reports, equal field
// for field.
func sameReports(t *testing.T, a, b *reportindex.Index, n int) {
	t.Helper()
	au, _, _ := a.Reports("", true, "", 0)
	bu, _, _ := b.Reports("", true, "", 0)
	if len(au) != n || !reflect.DeepEqual(au, bu) {
		t.Fatalf("reports of %v, want %v", au, bu)
	}
	for _, uid := range au {
		ar, _ := a.Report(uid)
		br, _ := b.Report(uid)
		if !reflect.DeepEqual(ar.Object.Object, br.Object.Object) {
			t.Fatalf("%s:\n%v\nwant\n%v", uid, ar.Object.Object, br.Object.Object)
		}
	}
}
