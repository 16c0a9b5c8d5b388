// Package embedded runs nats-server with JetStream inside the process: the
// single-process demo (`verdict-dev`), and the queue tests, which need a
// real server. It is a package of its own so that what only connects to
// NATS (the services' libraries, the pipeline CLI's `work` command) does
// not link the server.
package embedded

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"path/filepath"
	"strconv"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/rs/zerolog"
)

// Config describes an embedded nats-server with JetStream.
type Config struct {
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
	Cluster *Cluster
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

// Cluster is the cluster part of Config.
type Cluster struct {
	// Name of the cluster, the same on every member.
	Name string
	// Host and Port of this member's route listener.
	Host string
	Port int
	// Routes are the route URLs of all members (nats-route://host:port);
	// this member's own is ignored by the server.
	Routes []string
}

// Server is a running embedded nats-server.
type Server struct {
	srv *server.Server
	cfg Config
}

// Run starts an embedded nats-server with JetStream on and waits
// until it takes connections. For a single server that is also when
// JetStream is usable; a cluster member needs its peers first (see
// RunCluster).
func Run(ctx context.Context, cfg Config) (*Server, error) {
	if cfg.StoreDir == "" {
		return nil, fmt.Errorf("%w: %w: StoreDir is required", ErrStart, ErrInvalidConfig)
	}
	if cfg.Port < 0 {
		return nil, fmt.Errorf("%w: %w: Port %d: use 0 for a free port", ErrStart, ErrInvalidConfig, cfg.Port)
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
			return nil, fmt.Errorf("%w: %w: a cluster member needs Name, Cluster.Name and Cluster.Port", ErrStart, ErrInvalidConfig)
		}
		host := c.Host
		if host == "" {
			host = "127.0.0.1"
		}
		opts.Cluster = server.ClusterOpts{Name: c.Name, Host: host, Port: c.Port}
		for _, r := range c.Routes {
			u, err := url.Parse(r)
			if err != nil {
				return nil, fmt.Errorf("%w: %w: route %q: %w", ErrStart, ErrInvalidConfig, r, err)
			}
			opts.Routes = append(opts.Routes, u)
		}
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStart, err)
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
		return nil, fmt.Errorf("%w: not ready for connections within %s", ErrStart, cfg.ReadyTimeout)
	}
	if !cfg.InProcessOnly {
		if tcp, ok := srv.Addr().(*net.TCPAddr); ok {
			cfg.Port = tcp.Port
		}
	}
	if cfg.Name == "" {
		cfg.Name = srv.Name()
	}
	return &Server{srv: srv, cfg: cfg}, nil
}

// Server is the nats-server itself.
func (e *Server) Server() *server.Server { return e.srv }

// InProcessConn opens a connection to the server without TCP (nats.go's
// InProcessServer uses it: queue.WithEmbedded).
func (e *Server) InProcessConn() (net.Conn, error) { return e.srv.InProcessConn() }

// Name is the server's name (the name JetStream uses for stream leaders).
func (e *Server) Name() string { return e.srv.Name() }

// ClientURL is the URL clients connect to; empty for InProcessOnly.
func (e *Server) ClientURL() string {
	if e.cfg.InProcessOnly {
		return ""
	}
	return "nats://" + net.JoinHostPort(e.cfg.Host, strconv.Itoa(e.cfg.Port))
}

// Config is the configuration the server runs with, its port resolved:
// Run(ctx, e.Config()) after Shutdown restarts the same server on the
// same port and store.
func (e *Server) Config() Config { return e.cfg }

// Shutdown stops the server and waits until it has stopped.
func (e *Server) Shutdown() {
	e.srv.Shutdown()
	e.srv.WaitForShutdown()
}

// RunCluster starts n embedded servers clustered on loopback, each
// with a store under baseDir/<name>, and waits until JetStream has a meta
// leader. Server i is named "verdict-<i>". Shut them down with Shutdown on
// each.
func RunCluster(ctx context.Context, n int, baseDir string, logger *zerolog.Logger) ([]*Server, error) {
	if n < 1 {
		return nil, fmt.Errorf("%w: %w: cluster size %d", ErrStart, ErrInvalidConfig, n)
	}
	ports, err := freePorts(2 * n)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrStart, err)
	}
	routes := make([]string, n)
	for i := range n {
		routes[i] = "nats-route://127.0.0.1:" + strconv.Itoa(ports[n+i])
	}
	servers := make([]*Server, 0, n)
	stopAll := func() {
		for _, s := range servers {
			s.Shutdown()
		}
	}
	for i := range n {
		name := "verdict-" + strconv.Itoa(i)
		e, err := Run(ctx, Config{
			Name:     name,
			StoreDir: filepath.Join(baseDir, name),
			Port:     ports[i],
			Cluster:  &Cluster{Name: "verdict", Port: ports[n+i], Routes: routes},
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
func WaitForMetaLeader(ctx context.Context, servers []*Server) error {
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
			return fmt.Errorf("%w: no JetStream meta leader: %w", ErrStart, ctx.Err())
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

// Errors.
var (
	// ErrStart: the server could not start.
	ErrStart = errors.New("embedded: nats-server did not start")
	// ErrInvalidConfig: the Config cannot run (wrapped with ErrStart).
	ErrInvalidConfig = errors.New("invalid config")
)

// serverLogger routes the server's log lines into zerolog. Debug and
// trace lines are left out: the server is chatty at those levels.
type serverLogger struct{ log zerolog.Logger }

func (l serverLogger) Noticef(format string, v ...any) {
	l.log.Info().Str(logKeyLine, fmt.Sprintf(format, v...)).Msg(msgServerLog)
}
func (l serverLogger) Warnf(format string, v ...any) {
	l.log.Warn().Str(logKeyLine, fmt.Sprintf(format, v...)).Msg(msgServerLog)
}
func (l serverLogger) Fatalf(format string, v ...any) {
	l.log.Error().Bool("fatal", true).Str(logKeyLine, fmt.Sprintf(format, v...)).Msg(msgServerLog)
}
func (l serverLogger) Errorf(format string, v ...any) {
	l.log.Error().Str(logKeyLine, fmt.Sprintf(format, v...)).Msg(msgServerLog)
}
func (l serverLogger) Debugf(string, ...any) {}
func (l serverLogger) Tracef(string, ...any) {}

const (
	msgServerLog   = "nats-server"
	logKeyLine     = "line"
	logKeyServer   = "natsServer"
	logKeyStoreDir = "storeDir"
)
