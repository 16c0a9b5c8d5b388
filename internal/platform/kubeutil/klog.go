package kubeutil

import (
	"fmt"
	"sync"

	"github.com/go-logr/logr"
	"github.com/rs/zerolog"
	"k8s.io/klog/v2"

	"github.com/verdict-dev/verdict/internal/platform/logkey"
)

// RouteKlog sends client-go's klog output into log: Info at V(0) becomes
// info, higher verbosity debug, errors error. Only the first call in a
// process takes effect (klog's logger is process-wide; changing it while
// clients log would race).
func RouteKlog(log zerolog.Logger) {
	klogOnce.Do(func() {
		klog.SetLogger(logr.New(&sink{log: log.With().Str(logkey.Component, "client-go").Logger()}))
	})
}

var klogOnce sync.Once

// sink is a logr.LogSink over zerolog.
type sink struct {
	log  zerolog.Logger
	name string
}

func (s *sink) Init(logr.RuntimeInfo) {}

func (s *sink) Enabled(level int) bool {
	if level > 0 {
		return s.log.GetLevel() <= zerolog.DebugLevel
	}
	return s.log.GetLevel() <= zerolog.InfoLevel
}

func (s *sink) Info(level int, msg string, kv ...any) {
	ev := s.log.Info()
	if level > 0 {
		ev = s.log.Debug()
	}
	s.write(ev, msg, kv)
}

func (s *sink) Error(err error, msg string, kv ...any) {
	s.write(s.log.Error().Err(err), msg, kv)
}

func (s *sink) write(ev *zerolog.Event, msg string, kv []any) {
	if s.name != "" {
		ev = ev.Str(logkey.Logger, s.name)
	}
	for i := 0; i+1 < len(kv); i += 2 {
		ev = ev.Interface(fmt.Sprint(kv[i]), kv[i+1])
	}
	ev.Msg(msg)
}

func (s *sink) WithValues(kv ...any) logr.LogSink {
	ctx := s.log.With()
	for i := 0; i+1 < len(kv); i += 2 {
		ctx = ctx.Interface(fmt.Sprint(kv[i]), kv[i+1])
	}
	return &sink{log: ctx.Logger(), name: s.name}
}

func (s *sink) WithName(name string) logr.LogSink {
	n := name
	if s.name != "" {
		n = s.name + "." + name
	}
	return &sink{log: s.log, name: n}
}
