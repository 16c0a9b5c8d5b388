package queue

import (
	"fmt"

	"github.com/rs/zerolog"
)

// Log keys, defined once (lowerCamelCase, as everywhere in Verdict).
const (
	logKeyURL        = "natsURL"
	logKeyServer     = "natsServer"
	logKeyStream     = "stream"
	logKeyConsumer   = "consumer"
	logKeySubject    = "subject"
	logKeySequence   = "streamSeq"
	logKeyDelivery   = "delivery"
	logKeyReason     = "reason"
	logKeyDelay      = "delay"
	logKeyPublisher  = "publisher"
	logKeyDropped    = "dropped"
	logKeyPending    = "pending"
	logKeyReplicas   = "replicas"
	logKeyProgress   = "done"
	logKeyRemaining  = "remaining"
	logKeyComponent  = "component"
	logKeyAttempt    = "attempt"
	logKeyStoreDir   = "storeDir"
	logKeyConcurrent = "concurrency"
	logKeyLine       = "line"
)

// serverLogger routes the embedded nats-server's log lines into zerolog.
// Debug and trace lines are left out: the server is chatty at those levels.
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

const msgServerLog = "nats-server"
