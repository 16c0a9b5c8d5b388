package queue

import (
	"context"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/rs/zerolog"
)

// EmbeddedConfig describes an embedded nats-server with JetStream.
type EmbeddedConfig struct {
	// Name is the server name; it must be unique in a cluster. Default: a
	// name derived from the port.
	Name string
	// StoreDir is JetStream's file store directory. Required.
	StoreDir string
	// Host to listen on for clients. Default 127.0.0.1.
	Host string
	// Port for clients: 0 picks a free port (read it back with Port or
	// ClientURL), a positive value is used as is, and InProcessOnly opens
	// no port at all.
	Port int
	// InProcessOnly opens no listener: clients connect in process only
	// (Connect with WithEmbedded). The single-process default.
	InProcessOnly bool
	// Cluster, when set, makes the server a member of a JetStream cluster.
	Cluster *EmbeddedCluster
	// Logger receives the server's notices, warnings and errors. Nil keeps
	// the server quiet.
	Logger *zerolog.Logger
	// ReadyTimeout bounds the wait for the server to take connections.
	// Default 10s.
	ReadyTimeout time.Duration
	// NKeyUsers, when set, are the public NKeys of the only users allowed
	// to connect (clients authenticate with WithNKeyFile); empty lets
	// anyone connect.
	NKeyUsers []string
}

// EmbeddedCluster is the cluster part of EmbeddedConfig.
type EmbeddedCluster struct {
	// Name of the cluster, the same on every member.
	Name string
	// Host and Port of this member's route listener.
	Host string
	Port int
	// Routes are the route URLs of all members (nats-route://host:port);
	// this member's own is ignored by the server.
	Routes []string
}

// Embedded is a running embedded nats-server.
type Embedded struct {
	srv *server.Server
	cfg EmbeddedConfig
}

// RunEmbedded starts an embedded nats-server with JetStream on and waits
// until it takes connections. For a single server that is also when
// JetStream is usable; a cluster member needs its peers first (see
// RunEmbeddedCluster).
func RunEmbedded(ctx context.Context, cfg EmbeddedConfig) (*Embedded, error) {
	if cfg.StoreDir == "" {
		return nil, fmt.Errorf("%w: %w: StoreDir is required", ErrEmbedded, ErrInvalidOption)
	}
	if cfg.Port < 0 {
		return nil, fmt.Errorf("%w: %w: Port %d: use 0 for a free port", ErrEmbedded, ErrInvalidOption, cfg.Port)
	}
	if cfg.Host == "" {
		cfg.Host = "127.0.0.1"
	}
	if cfg.ReadyTimeout <= 0 {
		cfg.ReadyTimeout = 10 * time.Second
	}
	opts := &server.Options{
		ServerName: cfg.Name,
		Host:       cfg.Host,
		Port:       cfg.Port,
		DontListen: cfg.InProcessOnly,
		JetStream:  true,
		StoreDir:   cfg.StoreDir,
		NoSigs:     true,
		NoLog:      cfg.Logger == nil,
	}
	if cfg.Port == 0 {
		opts.Port = server.RANDOM_PORT
	}
	for _, pub := range cfg.NKeyUsers {
		opts.Nkeys = append(opts.Nkeys, &server.NkeyUser{Nkey: pub})
	}
	if c := cfg.Cluster; c != nil {
		if c.Name == "" || c.Port <= 0 || cfg.Name == "" {
			return nil, fmt.Errorf("%w: %w: a cluster member needs Name, Cluster.Name and Cluster.Port", ErrEmbedded, ErrInvalidOption)
		}
		host := c.Host
		if host == "" {
			host = "127.0.0.1"
		}
		opts.Cluster = server.ClusterOpts{Name: c.Name, Host: host, Port: c.Port}
		for _, r := range c.Routes {
			u, err := url.Parse(r)
			if err != nil {
				return nil, fmt.Errorf("%w: %w: route %q: %w", ErrEmbedded, ErrInvalidOption, r, err)
			}
			opts.Routes = append(opts.Routes, u)
		}
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrEmbedded, err)
	}
	if cfg.Logger != nil {
		srv.SetLoggerV2(serverLogger{log: cfg.Logger.With().Str(logKeyServer, srv.Name()).Logger()}, false, false, false)
	}
	srv.Start()
	deadline := time.Now().Add(cfg.ReadyTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	if !srv.ReadyForConnections(time.Until(deadline)) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("%w: not ready for connections within %s", ErrEmbedded, cfg.ReadyTimeout)
	}
	if !cfg.InProcessOnly {
		if tcp, ok := srv.Addr().(*net.TCPAddr); ok {
			cfg.Port = tcp.Port
		}
	}
	if cfg.Name == "" {
		cfg.Name = srv.Name()
	}
	return &Embedded{srv: srv, cfg: cfg}, nil
}

// Server is the nats-server itself.
func (e *Embedded) Server() *server.Server { return e.srv }

// Name is the server's name (the name JetStream uses for stream leaders).
func (e *Embedded) Name() string { return e.srv.Name() }

// ClientURL is the URL clients connect to; empty for InProcessOnly.
func (e *Embedded) ClientURL() string {
	if e.cfg.InProcessOnly {
		return ""
	}
	return "nats://" + net.JoinHostPort(e.cfg.Host, strconv.Itoa(e.cfg.Port))
}

// Config is the configuration the server runs with, its port resolved:
// RunEmbedded(ctx, e.Config()) after Shutdown restarts the same server on the
// same port and store.
func (e *Embedded) Config() EmbeddedConfig { return e.cfg }

// Shutdown stops the server and waits until it has stopped.
func (e *Embedded) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}

// RunEmbeddedCluster starts n embedded servers clustered on loopback, each
// with a store under baseDir/<name>, and waits until JetStream has a meta
// leader. Server i is named "verdict-<i>". Shut them down with Shutdown on
// each.
func RunEmbeddedCluster(ctx context.Context, n int, baseDir string, logger *zerolog.Logger) ([]*Embedded, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: %w: cluster size %d", ErrEmbedded, ErrInvalidOption, n)
	}
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrEmbedded, err)
	}
	routes := make([]string, n)
	for i := range n {
		routes[i] = "nats-route://127.0.0.1:" + strconv.Itoa(ports[n+i])
	}
	servers := make([]*Embedded, 0, n)
	stopAll := func() {
		for _, s := range servers {
			s.Shutdown()
		}
	}
	for i := range n {
		name := "verdict-" + strconv.Itoa(i)
		e, err := RunEmbedded(ctx, EmbeddedConfig{
			Name:     name,
			StoreDir: filepath.Join(baseDir, name),
			Port:     ports[i],
			Cluster:  &EmbeddedCluster{Name: "verdict", Port: ports[n+i], Routes: routes},
			Logger:   logger,
		})
		if err != nil {
			stopAll()
			return nil, err
		}
		servers = append(servers, e)
	}
	if err := WaitForMetaLeader(ctx, servers); err != nil {
		stopAll()
		return nil, err
	}
	return servers, nil
}

// WaitForMetaLeader waits until one of the running servers is the
// JetStream meta leader and every running server knows it.
func WaitForMetaLeader(ctx context.Context, servers []*Embedded) error {
	t := time.NewTicker(50 * time.Millisecond)
	defer t.Stop()
	for {
		leader := false
		current := true
		for _, s := range servers {
			if !s.srv.Running() {
				continue
			}
			if s.srv.JetStreamIsLeader() {
				leader = true
			}
			if !s.srv.JetStreamIsCurrent() {
				current = false
			}
		}
		if leader && current {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("%w: no JetStream meta leader: %w", ErrEmbedded, ctx.Err())
		case <-t.C:
		}
	}
}

// freePorts asks the kernel for n free loopback ports. They are closed
// before use, so another process could take one in between: good enough for
// tests and `verdict dev`, where a clash only means a retry.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	ls := make([]net.Listener, 0, n)
	defer func() {
		for _, l := range ls {
			_ = l.Close()
		}
	}()
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}
