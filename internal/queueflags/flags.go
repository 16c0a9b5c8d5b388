// Package queueflags binds the JetStream settings every service shares to
// the same kebab-case flags, so that services provisioning the same
// streams are configured alike.
package queueflags

import (
	"flag"
	"fmt"

	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/verdict-dev/verdict/pkg/queue"
)

// BindStreamLimits binds l's fields; the values in l are the defaults.
func BindStreamLimits(fs *flag.FlagSet, l *queue.StreamLimits) {
	fs.IntVar(&l.ResultHistory, "result-history", l.ResultHistory, "messages VERDICT_RESULTS keeps per resource and policy (the newest evaluation survives that many minus one late older ones); the same on every service")
	bytesVar(fs, &l.ResultsMaxBytes, "results-max-bytes", "size limit of VERDICT_RESULTS (a quantity: 4Gi); when full it refuses new results, never deletes stored ones; the same on every service")
	fs.Int64Var(&l.WorkMaxMsgs, "work-max-messages", l.WorkMaxMsgs, "message limit of VERDICT_WORK; when full it refuses new work; the same on every service")
	bytesVar(fs, &l.WorkMaxBytes, "work-max-bytes", "size limit of VERDICT_WORK (a quantity: 1Gi); when full it refuses new work; the same on every service")
}

// bytesVar binds a size flag written as a Kubernetes quantity (4Gi, 512Mi,
// 1000000).
func bytesVar(fs *flag.FlagSet, dst *int64, name, usage string) {
	fs.Func(name, usage+" (default "+resource.NewQuantity(*dst, resource.BinarySI).String()+")", func(s string) error {
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return err
		}
		n, ok := q.AsInt64()
		if !ok {
			return fmt.Errorf("%s is not a whole number of bytes", s)
		}
		*dst = n
		return nil
	})
}
