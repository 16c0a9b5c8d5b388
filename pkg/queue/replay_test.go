package queue

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"
)

// publishResults publishes one result per resource × policy, then a newer
// version for every tenth subject; it returns the latest payload per subject.
func publishResults(t testing.TB, c *Conn, resources, policies int) map[string]string {
	t.Helper()
	p, err := c.NewAsyncPublisher(WithBufferSize(resources*policies*2), WithMessageDeadline(time.Minute))
	if err != nil {
		t.Fatal(err)
	}
	latest := make(map[string]string, resources*policies)
	for version := 1; version <= 2; version++ {
		for r := range resources {
			uid := fmt.Sprintf("uid-%05d", r)
			for q := range policies {
				n := r*policies + q
				if version == 2 && n%10 != 0 {
					continue
				}
				key := fmt.Sprintf("ns-%d/policy.%d", q, q)
				subj := resultSubject(uid, key)
				data := fmt.Sprintf("v%d %s %s", version, uid, key)
				if err := p.Publish(Message{Subject: subj, ID: MsgID(uid, key, fmt.Sprint(version)), Data: []byte(data)}); err != nil {
					t.Fatal(err)
				}
				latest[subj] = data
			}
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := p.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if st := p.Stats(); st.Dropped != 0 {
		t.Fatalf("publisher stats %+v", st)
	}
	return latest
}

// Replay of 100,000 subjects returns exactly the last message of each.
func TestReplayLastPerSubject(t *testing.T) {
	if testing.Short() {
		t.Skip("100,000 subjects")
	}
	e := runServer(t)
	c := connect(t, e.ClientURL())
	provision(t, c)
	const resources, policies = 10000, 10
	start := time.Now()
	latest := publishResults(t, c, resources, policies)
	t.Logf("published %d results (+%d newer versions) in %s", len(latest), len(latest)/10, time.Since(start).Round(time.Millisecond))
	// Every tenth subject has two messages (the history keeps both).
	if n := streamMsgs(t, c, streamResults); n != uint64(len(latest)+len(latest)/10) {
		t.Fatalf("stream holds %d messages, want %d", n, len(latest)+len(latest)/10)
	}

	got := make(map[string]string, len(latest))
	var progress []ReplayProgress
	start = time.Now()
	final, err := c.Replay(context.Background(), streamResults, func(m ReplayMsg) error {
		if _, dup := got[m.Subject]; dup {
			return fmt.Errorf("subject %s replayed twice", m.Subject)
		}
		got[m.Subject] = string(m.Data)
		return nil
	}, WithReplayProgress(50*time.Millisecond, func(p ReplayProgress) { progress = append(progress, p) }))
	took := time.Since(start)
	if err != nil {
		t.Fatalf("Replay: %v", err)
	}
	if len(got) != len(latest) || final.Done != uint64(len(latest)) || final.Remaining != 0 {
		t.Fatalf("replayed %d subjects (progress %+v), want %d", len(got), final, len(latest))
	}
	for subj, want := range latest {
		if got[subj] != want {
			t.Fatalf("%s: replayed %q, want the last message %q", subj, got[subj], want)
		}
	}
	if len(progress) == 0 || progress[len(progress)-1].Done != uint64(len(latest)) {
		t.Fatalf("progress reports %+v", progress)
	}
	t.Logf("replayed %d subjects in %s (%.0f msgs/s), %d progress reports", len(got), took.Round(time.Millisecond),
		float64(len(got))/took.Seconds(), len(progress))

	// A filtered replay: the results of one resource.
	var one []string
	if _, err := c.Replay(context.Background(), streamResults, func(m ReplayMsg) error {
		one = append(one, string(m.Data))
		return nil
	}, WithReplayFilter(resultsOfResource("uid-00042"))); err != nil {
		t.Fatal(err)
	}
	if len(one) != policies {
		t.Fatalf("filtered replay gave %d results, want %d", len(one), policies)
	}
}

func TestReplayEmptyAndAbort(t *testing.T) {
	e := runServer(t)
	c := connect(t, e.ClientURL())
	provision(t, c)
	p, err := c.Replay(context.Background(), streamResults, func(ReplayMsg) error { return errors.New("unexpected") })
	if err != nil || p.Done != 0 {
		t.Fatalf("empty replay = %+v, %v", p, err)
	}
	publishResults(t, c, 10, 3)
	stop := errors.New("stop here")
	n := 0
	_, err = c.Replay(context.Background(), streamResults, func(ReplayMsg) error {
		n++
		if n == 5 {
			return stop
		}
		return nil
	})
	if !errors.Is(err, stop) || n != 5 {
		t.Fatalf("aborted replay: n=%d err=%v", n, err)
	}
}

// TestReplayOfMessagesPurgedMeanwhile: messages counted pending when a
// replay starts and purged before they are delivered (a resource's
// results purged while a fold reads them) end the replay with what was
// delivered; it used to wait for them for ever, and a projector's flush
// or a scan with it.
func TestReplayOfMessagesPurgedMeanwhile(t *testing.T) {
	e := runServer(t)
	c := connect(t, e.ClientURL())
	provision(t, c)
	publishResults(t, c, 10, 3)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	n := 0
	start := time.Now()
	p, err := c.Replay(ctx, streamResults, func(ReplayMsg) error {
		n++
		if n == 1 {
			if _, err := c.Purge(ctx, streamResults, ">"); err != nil {
				return err
			}
		}
		return nil
	}, WithReplayAll(), WithReplayBatch(1))
	if err != nil {
		t.Fatalf("replay after %d messages, %v: %v", n, time.Since(start), err)
	}
	if n == 30 || p.Done != uint64(n) {
		t.Fatalf("%d messages handed, progress %+v: want fewer than the 30 stored, all counted", n, p)
	}
	if d := time.Since(start); d > 5*time.Second {
		t.Errorf("the replay took %v to see that nothing is left", d)
	}
}
