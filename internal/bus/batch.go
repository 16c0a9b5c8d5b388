package bus

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/verdict-dev/verdict/pkg/jsonread"
	"github.com/verdict-dev/verdict/pkg/queue"
)

// A result batch is the results of many policies on one resource in one
// message: an admission's (every policy the webhook evaluated on one
// version of the object, one message and one acknowledgement instead of
// one per policy), or the reporter's verified copy of a resource's fold
// (the newest verified result of each of its policies). Its subject is
// ResultBatchSubject, verdict.results.<resource-uid>.@batch, and its data
// a ResultBatch; each of its results reads and folds as the result of one
// policy would on its own subject. '@' is never in a token EncodeToken
// makes, so no policy's subject is a batch's.
//
// A subject keeps the last few messages (WithResultHistory), so a
// resource keeps its last few admission batches: a policy's result in an
// older batch that a later admission did not evaluate (a rule that
// selects CREATE only) is kept by the reporter's verified copy, written
// after each fold (the newest result of every policy).
const batchToken = "@batch"

// ResultBatch is the data of a result batch: results of distinct policies
// on one resource (the same uid; in an admission's batch, the same
// resource version), each as a ResultEvent.
type ResultBatch struct {
	Results []ResultEvent `json:"results"`
}

// ResultBatchSubject is the subject of the result batches of one resource.
func ResultBatchSubject(resourceUID string) string {
	return string(appendResultBatchSubject(nil, resourceUID))
}

func appendResultBatchSubject(b []byte, resourceUID string) []byte {
	b = queue.AppendEncodedToken(append(b, resultsPrefix...), resourceUID)
	return append(append(b, '.'), batchToken...)
}

// ResultBatches is the filter matching the result batches of every
// resource; VerifiedBatches the reporter's verified copies of them. A
// policy's results are those on ResultsOfPolicy and VerifiedOfPolicy and
// its entries in these.
const (
	ResultBatches   = resultsPrefix + "*." + batchToken
	VerifiedBatches = verifiedPrefix + "*." + batchToken
)

// ErrInvalidBatch is wrapped by DecodeResultBatch's error for data that
// is JSON of the right shape but no batch: no results, results of two
// resources, two results of one policy.
var ErrInvalidBatch = errors.New("invalid result batch")

// ResultBatchMessage is the queue message of the results evs of one
// admission: one resource (the same uid and version), distinct policies.
// Its id names the resource, its version and the request, and each
// result's policy at its version (without a uid, a policy loaded from a
// file, the outcome of its rules stands for the version), so the same
// evaluation published twice (a retry, two replicas answering the same
// request) is stored once, and evaluations that differ are all stored.
func ResultBatchMessage(evs []ResultEvent) (queue.Message, error) {
	if err := checkBatch(evs, true); err != nil {
		return queue.Message{}, err
	}
	for _, ev := range evs {
		if err := resultComplete(ev); err != nil {
			return queue.Message{}, err
		}
	}
	data, err := EncodeResultBatch(evs)
	if err != nil {
		return queue.Message{}, err
	}
	res := evs[0].Resource
	parts := make([]string, 0, 4+5*len(evs))
	parts = append(parts, "results", res.UID, res.ResourceVersion, evs[0].RequestUID)
	for _, ev := range evs {
		parts = append(parts, ev.Policy.ResultKey(), ev.Policy.UID, ev.Policy.ResourceVersion, ev.RequestUID, ev.Retracted)
		if ev.Policy.UID == "" {
			for _, r := range ev.Rules {
				parts = append(parts, r.Name, string(r.Status), r.Message, r.Exception)
			}
		}
	}
	var text [256]byte
	t := appendResultBatchSubject(text[:0], res.UID)
	split := len(t)
	t = queue.AppendMsgID(t, parts...)
	return queue.Message{Subject: string(t[:split]), ID: string(t[split:]), Data: data}, nil
}

// VerifiedBatchMessage is the queue message of the reporter's verified
// copy of a resource's fold: evs are the newest verified result of each
// policy (the same uid; versions and times may differ). id identifies the
// fold (the results it copies).
func VerifiedBatchMessage(evs []ResultEvent, id string) (queue.Message, error) {
	if err := checkBatch(evs, false); err != nil {
		return queue.Message{}, err
	}
	data, err := EncodeResultBatch(evs)
	if err != nil {
		return queue.Message{}, err
	}
	return queue.Message{Subject: VerifiedCopySubject(ResultBatchSubject(evs[0].Resource.UID)), ID: id, Data: data}, nil
}

// checkBatch checks that evs can be one batch: at least one result, one
// resource uid (one version too when sameVersion), one result per policy.
func checkBatch(evs []ResultEvent, sameVersion bool) error {
	if len(evs) == 0 {
		return fmt.Errorf("%w: no results", ErrInvalidBatch)
	}
	res := evs[0].Resource
	if res.UID == "" {
		return fmt.Errorf("%w: a result needs a resource uid", ErrIncomplete)
	}
	for i, ev := range evs {
		switch {
		case ev.Resource.UID != res.UID:
			return fmt.Errorf("%w: results of resources %q and %q", ErrInvalidBatch, res.UID, ev.Resource.UID)
		case sameVersion && ev.Resource != res:
			return fmt.Errorf("%w: results of two versions of resource %q", ErrInvalidBatch, res.UID)
		}
		k := ev.Policy.ResultKey()
		for _, o := range evs[:i] {
			if o.Policy.ResultKey() == k {
				return fmt.Errorf("%w: two results of policy %q", ErrInvalidBatch, k)
			}
		}
	}
	return nil
}

// EncodeResultBatch encodes ResultBatch{Results: evs} as json.Marshal
// does, byte for byte (each result as EncodeResultEvent encodes it; what
// consecutive results share, their resource and time, is copied rather
// than encoded again).
func EncodeResultBatch(evs []ResultEvent) ([]byte, error) {
	size := 16
	for _, ev := range evs {
		size += resultEventSize(ev) + 1
	}
	b := append(make([]byte, 0, size), `{"results":`...)
	if evs == nil {
		return append(b, "null}"...), nil
	}
	b = append(b, '[')
	var enc resultEncoder
	for i, ev := range evs {
		if i > 0 {
			b = append(b, ',')
		}
		var err error
		if b, err = enc.append(b, ev); err != nil {
			return nil, err
		}
	}
	return append(b, "]}"...), nil
}

// DecodeResultBatch decodes a batch's data as json.Unmarshal would (the
// direct path of DecodeResultEvent for each result, encoding/json for
// anything else), and checks that it is one: results about one resource
// uid, one per policy; sameVersion asks for one resource version too (an
// admission's batch).
func DecodeResultBatch(data []byte, sameVersion bool) ([]ResultEvent, error) {
	var b ResultBatch
	d := fastDecoder{jsonread.Reader{Data: data}}
	if !d.batch(&b.Results) || !d.End() {
		b = ResultBatch{}
		if err := json.Unmarshal(data, &b); err != nil {
			return nil, err
		}
	}
	if err := checkBatch(b.Results, sameVersion); err != nil {
		return nil, err
	}
	return b.Results, nil
}

func (d *fastDecoder) batch(out *[]ResultEvent) bool {
	var seen uint32
	return d.Object(func(k []byte) bool {
		if string(k) != "results" || !jsonread.Once(&seen, 0) {
			return false
		}
		return list(d, out, d.resultEvent)
	})
}

// DecodeResults reads one VERDICT_RESULTS message: a single result (its
// subject names the resource uid and the policy key, its data is a
// ResultEvent about the same pair) or a batch (ResultBatchSubject:
// the results of distinct policies on the resource the subject names; in
// an admission's batch, at one version). Anything else is an error (the
// message can never be folded).
//
// A verified copy (VerifiedCopySubject) decodes as the result or
// batch it copies; a copied batch may hold results of several versions of
// the resource (the newest of each policy).
func DecodeResults(subject string, data []byte) ([]ResultEvent, error) {
	subject, copied := ParseVerifiedCopy(subject)
	uid, policy, batch, err := ParseResultsSubject(subject)
	if err != nil {
		return nil, err
	}
	if batch {
		evs, err := DecodeResultBatch(data, !copied)
		if err != nil {
			return nil, fmt.Errorf("decode result batch on %s: %w", subject, err)
		}
		if evs[0].Resource.UID != uid {
			return nil, fmt.Errorf("result batch on %s is about resource %q", subject, evs[0].Resource.UID)
		}
		return evs, nil
	}
	ev, err := DecodeResultEvent(data)
	if err != nil {
		return nil, fmt.Errorf("decode result on %s: %w", subject, err)
	}
	if ev.Resource.UID != uid || ev.Policy.ResultKey() != policy {
		return nil, fmt.Errorf("result on %s is about resource %q and policy %q", subject, ev.Resource.UID, ev.Policy.Key)
	}
	return []ResultEvent{ev}, nil
}

// ParseResultsSubject splits a result subject (ResultSubject or
// ResultBatchSubject) back into its resource uid and policy key (empty
// for a batch).
func ParseResultsSubject(subject string) (resourceUID, policyKey string, batch bool, err error) {
	rest, ok := strings.CutPrefix(subject, resultsPrefix)
	if !ok {
		return "", "", false, fmt.Errorf("%w: %q is not a result subject", queue.ErrInvalidSubject, subject)
	}
	a, b, ok := strings.Cut(rest, ".")
	if !ok || strings.Contains(b, ".") {
		return "", "", false, fmt.Errorf("%w: %q: want two tokens after %q", queue.ErrInvalidSubject, subject, resultsPrefix)
	}
	if resourceUID, err = queue.DecodeToken(a); err != nil {
		return "", "", false, err
	}
	if b == batchToken {
		return resourceUID, "", true, nil
	}
	if policyKey, err = queue.DecodeToken(b); err != nil {
		return "", "", false, err
	}
	return resourceUID, policyKey, false, nil
}
