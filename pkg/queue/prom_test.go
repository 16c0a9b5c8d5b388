package queue_test

import (
	"github.com/verdict-dev/verdict/pkg/queue"
	"github.com/verdict-dev/verdict/pkg/queue/queueprom"
)

// The package's tests read their metrics through queueprom, which they
// cannot import (see NewPromMetrics).
func init() { queue.NewPromMetrics = queueprom.NewMetrics }
