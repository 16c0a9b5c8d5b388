package natsconn

import (
	"errors"
	"flag"
	"io"
	"reflect"
	"strings"
	"testing"
)

func TestBindFlags(t *testing.T) {
	c := Default()
	fs := flag.NewFlagSet("cmd", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	BindFlags(fs, &c)
	if err := fs.Parse([]string{
		"--nats-url=nats://a:4222, nats://b:4222", "--nats-url=tls://c:4222", "--nats-credentials=/n/creds",
		"--nats-ca-file=/ca", "--nats-cert-file=/c", "--nats-key-file=/k",
	}); err != nil {
		t.Fatal(err)
	}
	want := Config{URLs: []string{"nats://a:4222", "nats://b:4222", "tls://c:4222"}, Credentials: "/n/creds", CAFile: "/ca", CertFile: "/c", KeyFile: "/k"}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("config %+v\nwant %+v", c, want)
	}
	if err := c.Validate(); err != nil {
		t.Fatal(err)
	}
	if d := Default(); !reflect.DeepEqual(d.URLs, []string{DefaultURL}) || d.Validate() != nil {
		t.Fatalf("default %+v: %v", d, d.Validate())
	}
}

func TestValidate(t *testing.T) {
	tests := map[string]struct {
		c    Config
		want []string
	}{
		"no url":              {c: Config{}, want: []string{"--nats-url"}},
		"two authentications": {c: Config{URLs: []string{DefaultURL}, Credentials: "c", NKeyFile: "n"}, want: []string{"give one"}},
		"cert without key":    {c: Config{URLs: []string{DefaultURL}, CertFile: "c"}, want: []string{"go together"}},
		"every problem":       {c: Config{KeyFile: "k"}, want: []string{"--nats-url", "go together"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := tc.c.Validate()
			if !errors.Is(err, ErrInvalidConfig) {
				t.Fatalf("error %v, want ErrInvalidConfig", err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not name %q", err, w)
				}
			}
		})
	}
}

func TestRedacted(t *testing.T) {
	c := Config{URLs: []string{"nats://alice:s3cret@a:4222", "tls://token@b:4222", "c:4222", "nats://d:4222"}}
	if got, want := c.Redacted(), "nats://***@a:4222,tls://***@b:4222,c:4222,nats://d:4222"; got != want {
		t.Fatalf("Redacted() = %q, want %q", got, want)
	}
}
