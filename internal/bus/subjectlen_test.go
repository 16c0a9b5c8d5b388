package bus

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/pkg/queue"
)

// TestLongSubjectsKeepTheConnection: a subject longer than nats-server's
// control line makes the server drop the client, and nats.go then closes
// the connection for good (issue 28, finding 6: a review's 5,000-byte uid
// became a result subject, and the webhook's connection never came back).
// Every publish refuses such a subject before it is sent, the connection
// stays up, and a work key of any length makes a bounded subject. A
// connection the server does drop says so on queue.Done.
func TestLongSubjectsKeepTheConnection(t *testing.T) {
	e := runServer(t)
	c := connect(t, e.ClientURL())
	provision(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()

	long := strings.Repeat("a", 5000)
	tooLong := queue.Message{Subject: ResultSubject(long, "policy"), ID: queue.MsgID("long"), Data: []byte("{}")}
	if _, err := c.PublishSync(ctx, tooLong); !errors.Is(err, queue.ErrInvalidSubject) {
		t.Fatalf("PublishSync of a %d-byte subject: %.200v, want queue.ErrInvalidSubject", len(tooLong.Subject), err)
	}
	p, err := c.NewAsyncPublisher()
	if err != nil {
		t.Fatal(err)
	}
	if err := p.PublishAll([]queue.Message{tooLong}); !errors.Is(err, queue.ErrInvalidSubject) {
		t.Fatalf("PublishAll of a %d-byte subject: %.200v, want queue.ErrInvalidSubject", len(tooLong.Subject), err)
	}

	// Work keys are shortened, never refused: a generate rule's key names
	// a policy, a rule and a uid, and distinct keys keep distinct subjects.
	subjects := map[string]bool{}
	for _, key := range []string{long, long + "b", strings.Repeat("/", 5000), strings.Repeat("é.", 3000)} {
		subj, err := WorkSubject(WorkGenerate, key)
		if err != nil {
			t.Fatal(err)
		}
		if len(subj) > queue.MaxSubjectLen || subjects[subj] {
			t.Fatalf("WorkSubject of a %d-byte key: %d bytes, seen before %v", len(key), len(subj), subjects[subj])
		}
		subjects[subj] = true
		if kind, short, err := ParseWorkSubject(subj); err != nil || kind != WorkGenerate || !strings.HasPrefix(key, strings.Split(short, "#")[0]) {
			t.Fatalf("ParseWorkSubject(%q) = %q, %q, %v", subj, kind, short, err)
		}
		if _, err := c.PublishSync(ctx, queue.Message{Subject: subj, ID: queue.MsgID(key), Data: []byte("{}")}); err != nil {
			t.Fatalf("publish work of a %d-byte key: %v", len(key), err)
		}
	}
	if !c.Connected() {
		t.Fatal("the connection went down")
	}
	select {
	case <-c.Done():
		t.Fatalf("the connection closed: %v", c.Err())
	default:
	}
	if n := streamMsgs(t, c, StreamWork); n != 4 {
		t.Fatalf("VERDICT_WORK holds %d messages, want 4", n)
	}

	// What happened before: a raw publish of the long subject. The server
	// drops the client, the client closes for good, and queue.Done says so.
	if err := c.NATS().Publish(tooLong.Subject, nil); err != nil {
		t.Fatal(err)
	}
	_ = c.NATS().Flush()
	select {
	case <-c.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not drop the client, or queue.Done did not say so")
	}
	if c.Err() == nil || c.Connected() {
		t.Fatalf("closed connection: err %v, connected %v", c.Err(), c.Connected())
	}
}
