package platform

import (
	"context"
	"errors"
	"flag"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/internal/bus"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/rs/zerolog"

	"github.com/verdict-dev/verdict/internal/platform/natsconn"
	"github.com/verdict-dev/verdict/internal/testkit/natstest"
)

func TestValidate(t *testing.T) {
	cases := map[string]struct {
		err  error
		want string
	}{
		"defaults":               {err: errors.Join(DefaultLogConfig().Validate(), DefaultKubeConfig().Validate(), DefaultNATSConfig().Validate())},
		"log level":              {err: LogConfig{Level: "loud", Format: LogFormatJSON}.Validate(), want: `log-level "loud"`},
		"log format":             {err: LogConfig{Level: "info", Format: "xml"}.Validate(), want: `log-format "xml"`},
		"qps":                    {err: KubeConfig{QPS: 0, Burst: 1}.Validate(), want: "api-qps"},
		"negative timeout":       {err: KubeConfig{QPS: 1, Burst: 1, Timeout: -time.Second}.Validate(), want: "api-timeout"},
		"no url":                 {err: func() error { c := DefaultNATSConfig(); c.URLs = nil; return c.Validate() }(), want: "--nats-url"},
		"two authentications":    {err: func() error { c := DefaultNATSConfig(); c.Credentials, c.NKeyFile = "c", "n"; return c.Validate() }(), want: "give one"},
		"cert without key":       {err: func() error { c := DefaultNATSConfig(); c.CertFile = "c"; return c.Validate() }(), want: "go together"},
		"two replicas":           {err: func() error { c := DefaultNATSConfig(); c.StreamReplicas = 2; return c.Validate() }(), want: "stream-replicas 2"},
		"stream limits":          {err: func() error { c := DefaultNATSConfig(); c.Streams.WorkMaxMsgs = 0; return c.Validate() }(), want: "work max messages"},
		"every problem reported": {err: func() error { c := DefaultNATSConfig(); c.URLs, c.StreamReplicas = nil, 4; return c.Validate() }(), want: "stream-replicas 4"},
	}
	for name, tc := range cases {
		t.Run(name, func(t *testing.T) {
			if tc.want == "" {
				if tc.err != nil {
					t.Fatal(tc.err)
				}
				return
			}
			if !errors.Is(tc.err, ErrInvalidConfig) || !strings.Contains(tc.err.Error(), tc.want) {
				t.Fatalf("error %v, want one wrapping ErrInvalidConfig and naming %q", tc.err, tc.want)
			}
		})
	}
}

func TestFlags(t *testing.T) {
	log, kube, nats := DefaultLogConfig(), DefaultKubeConfig(), DefaultNATSConfig()
	fs := flag.NewFlagSet("svc", flag.ContinueOnError)
	BindLogFlags(fs, &log)
	BindKubeFlags(fs, &kube)
	BindNATSFlags(fs, &nats)
	err := fs.Parse([]string{
		"--log-level=debug", "--log-format=console",
		"--kubeconfig=/k", "--api-qps=7", "--api-burst=9", "--api-timeout=3s",
		"--nats-url=nats://a:4222,nats://b:4222", "--nats-url=nats://c:4222", "--nats-nkey-file=/n.nk",
		"--nats-ca-file=/ca", "--nats-cert-file=/c", "--nats-key-file=/k",
		"--stream-replicas=3", "--result-history=8", "--results-max-bytes=2Gi", "--work-max-messages=10", "--work-max-bytes=64Mi",
		"--decisions-max-age=24h", "--decisions-max-bytes=256Mi",
	})
	if err != nil {
		t.Fatal(err)
	}
	want := NATSConfig{
		Config: natsconn.Config{
			URLs: []string{"nats://a:4222", "nats://b:4222", "nats://c:4222"}, NKeyFile: "/n.nk",
			CAFile: "/ca", CertFile: "/c", KeyFile: "/k",
		},
		StreamReplicas: 3,
		Streams: bus.StreamLimits{ResultHistory: 8, ResultsMaxBytes: 2 << 30, WorkMaxMsgs: 10, WorkMaxBytes: 64 << 20,
			DecisionsMaxAge: 24 * time.Hour, DecisionsMaxBytes: 256 << 20},
	}
	if !reflect.DeepEqual(nats, want) {
		t.Fatalf("nats\n%+v\nwant\n%+v", nats, want)
	}
	if log != (LogConfig{Level: "debug", Format: LogFormatConsole}) || kube != (KubeConfig{Kubeconfig: "/k", QPS: 7, Burst: 9, Timeout: 3 * time.Second}) {
		t.Fatalf("log %+v kube %+v", log, kube)
	}
	if err := fs.Parse([]string{"--work-max-bytes=lots"}); err == nil {
		t.Fatal("a size that is not a quantity was accepted")
	}
}

// The connection options carry the credentials: a server that lets in
// only one NKey user takes the connection with them and refuses it
// without.
func TestNATSCredentialsAreUsed(t *testing.T) {
	seedFile, public := natstest.NKeyUser(t)
	srv := natstest.Server(t, natstest.WithNKeyUsers(public))
	cfg := DefaultNATSConfig()
	cfg.URLs = []string{srv.ClientURL()}

	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	opts, err := cfg.ConnOptions("anonymous", zerolog.Nop(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	if c, err := bus.Connect(ctx, opts...); err == nil {
		c.Close()
		t.Fatal("connected without the NKey")
	}

	cfg.NKeyFile = seedFile
	ctx, cancel = context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	opts, err = cfg.ConnOptions("with-nkey", zerolog.Nop(), prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	c, err := bus.Connect(ctx, opts...)
	if err != nil {
		t.Fatalf("connect with the NKey: %v", err)
	}
	defer c.Close()
	if err := bus.Provision(ctx, c, cfg.ProvisionOptions()...); err != nil {
		t.Fatalf("provision with the NKey: %v", err)
	}
}
