package platform

import (
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"github.com/rs/zerolog"

	"github.com/verdict-dev/verdict/internal/platform/kubeutil"
)

// ErrInvalidConfig wraps every problem a Validate of this package finds.
var ErrInvalidConfig = errors.New("invalid service configuration")

// Log formats.
const (
	LogFormatJSON    = "json"
	LogFormatConsole = "console"
)

// LogConfig is the logger's configuration.
type LogConfig struct {
	// Level is a zerolog level name: trace, debug, info, warn or error.
	Level string
	// Format is json or console.
	Format string
}

// DefaultLogConfig logs JSON at info.
func DefaultLogConfig() LogConfig { return LogConfig{Level: "info", Format: LogFormatJSON} }

// Validate returns every problem, each wrapping ErrInvalidConfig.
func (c LogConfig) Validate() error {
	var errs []error
	if _, err := zerolog.ParseLevel(c.Level); err != nil || c.Level == "" {
		errs = append(errs, fmt.Errorf("%w: log-level %q: trace, debug, info, warn or error", ErrInvalidConfig, c.Level))
	}
	if c.Format != LogFormatJSON && c.Format != LogFormatConsole {
		errs = append(errs, fmt.Errorf("%w: log-format %q: json or console", ErrInvalidConfig, c.Format))
	}
	return errors.Join(errs...)
}

// Logger returns the logger writing to w, and routes client-go's klog
// into it (once per process).
func (c LogConfig) Logger(w io.Writer) (zerolog.Logger, error) {
	if err := c.Validate(); err != nil {
		return zerolog.Nop(), err
	}
	lvl, _ := zerolog.ParseLevel(c.Level)
	if c.Format == LogFormatConsole {
		w = zerolog.ConsoleWriter{Out: w, TimeFormat: time.RFC3339}
	}
	log := zerolog.New(w).Level(lvl).With().Timestamp().Logger()
	kubeutil.RouteKlog(log)
	return log, nil
}

// BindLogFlags binds --log-level and --log-format.
func BindLogFlags(fs *flag.FlagSet, c *LogConfig) {
	fs.StringVar(&c.Level, "log-level", c.Level, "trace, debug, info, warn or error")
	fs.StringVar(&c.Format, "log-format", c.Format, "json or console")
}
