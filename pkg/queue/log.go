package queue

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
	logKeyCause      = "cause"
	logKeyOutcome    = "outcome"
	logKeyDetail     = "detail"
)
