package bus

import (
	"encoding/json"
	"maps"
	"slices"
	"strconv"
	"time"

	"github.com/verdict-dev/verdict/pkg/jsonwrite"
)

// EncodeResultEvent encodes a result as json.Marshal does, byte for byte,
// without reflection: the webhook publishes one per policy per admission.
// FuzzEncodeResultEvent holds the two to the same bytes; an event
// json.Marshal would refuse (a timestamp outside years 0 to 9999, or a
// zone 24 hours or more from UTC) is handed to it for its error.
func EncodeResultEvent(ev ResultEvent) ([]byte, error) {
	b, err := AppendResultEvent(make([]byte, 0, resultEventSize(ev)), ev)
	if err != nil {
		return nil, err
	}
	return b, nil
}

// resultEventSize is about the length of ev's encoding (a little more, as
// a rule): what a buffer for it is given.
func resultEventSize(ev ResultEvent) int {
	r, p := ev.Resource, ev.Policy
	size := 256 + len(r.APIVersion) + len(r.Kind) + len(r.Namespace) + len(r.Name) + len(r.UID) + len(r.ResourceVersion) +
		len(p.Key) + len(p.Kind) + len(p.UID) + len(p.ResourceVersion) + len(ev.Category) + len(ev.Severity) + len(ev.RequestUID) + len(ev.Retracted)
	for _, rr := range ev.Rules {
		size += 64 + len(rr.Name) + len(rr.Type) + len(rr.Status) + len(rr.Message) + len(rr.Exception)
		for k, v := range rr.Properties {
			size += 8 + len(k) + len(v)
		}
	}
	return size
}

// AppendResultEvent appends EncodeResultEvent's bytes to b.
func AppendResultEvent(b []byte, ev ResultEvent) ([]byte, error) {
	var e resultEncoder
	return e.append(b, ev)
}

// resultEncoder appends result events to one buffer, and copies what the
// previous event had alike (an admission's results share their resource
// and their time) rather than encoding it again. Whoever shortens the
// buffer must reset it.
type resultEncoder struct {
	res            ResourceRef
	resFrom, resTo int // where the resource's fields are in the buffer
	hasRes         bool
	at             time.Time
	atFrom, atTo   int // where the timestamp's text is
	hasAt          bool
}

func (e *resultEncoder) append(b []byte, ev ResultEvent) ([]byte, error) {
	_, offset := ev.Timestamp.Zone()
	if y := ev.Timestamp.Year(); y < 0 || y > 9999 || offset <= -24*3600 || offset >= 24*3600 {
		data, err := json.Marshal(ev)
		if err != nil {
			return b, err
		}
		return append(b, data...), nil
	}
	r, p := ev.Resource, ev.Policy
	b = append(b, `{"resource":{"apiVersion":`...)
	if e.hasRes && r == e.res {
		b = append(b, b[e.resFrom:e.resTo]...)
	} else {
		from := len(b)
		b = jsonwrite.String(b, r.APIVersion)
		b = append(b, `,"kind":`...)
		b = jsonwrite.String(b, r.Kind)
		b = jsonwrite.OptionalString(b, `,"namespace":`, r.Namespace)
		b = append(b, `,"name":`...)
		b = jsonwrite.String(b, r.Name)
		b = jsonwrite.OptionalString(b, `,"uid":`, r.UID)
		b = jsonwrite.OptionalString(b, `,"resourceVersion":`, r.ResourceVersion)
		e.res, e.resFrom, e.resTo, e.hasRes = r, from, len(b), true
	}
	b = append(b, `},"policy":{"key":`...)
	b = jsonwrite.String(b, p.Key)
	b = jsonwrite.OptionalString(b, `,"kind":`, p.Kind)
	b = jsonwrite.OptionalString(b, `,"uid":`, p.UID)
	b = jsonwrite.OptionalString(b, `,"resourceVersion":`, p.ResourceVersion)
	b = append(b, `},"rules":`...)
	if ev.Rules == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, rr := range ev.Rules {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"name":`...)
			b = jsonwrite.String(b, rr.Name)
			b = append(b, `,"type":`...)
			b = jsonwrite.String(b, string(rr.Type))
			b = append(b, `,"status":`...)
			b = jsonwrite.String(b, string(rr.Status))
			b = jsonwrite.OptionalString(b, `,"message":`, rr.Message)
			b = jsonwrite.OptionalString(b, `,"exception":`, rr.Exception)
			if len(rr.Properties) > 0 {
				b = append(b, `,"properties":{`...)
				for j, k := range slices.Sorted(maps.Keys(rr.Properties)) {
					if j > 0 {
						b = append(b, ',')
					}
					b = jsonwrite.String(b, k)
					b = append(b, ':')
					b = jsonwrite.String(b, rr.Properties[k])
				}
				b = append(b, '}')
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = jsonwrite.OptionalString(b, `,"category":`, ev.Category)
	b = jsonwrite.OptionalString(b, `,"severity":`, ev.Severity)
	b = append(b, `,"scored":`...)
	b = strconv.AppendBool(b, ev.Scored)
	b = append(b, `,"timestamp":`...)
	b = append(b, '"')
	if e.hasAt && ev.Timestamp.Equal(e.at) && ev.Timestamp.Location() == e.at.Location() {
		b = append(b, b[e.atFrom:e.atTo]...)
	} else {
		from := len(b)
		b = ev.Timestamp.AppendFormat(b, time.RFC3339Nano)
		e.at, e.atFrom, e.atTo, e.hasAt = ev.Timestamp, from, len(b), true
	}
	b = append(b, '"')
	b = append(b, `,"admission":`...)
	b = strconv.AppendBool(b, ev.Admission)
	b = jsonwrite.OptionalString(b, `,"requestUid":`, ev.RequestUID)
	b = jsonwrite.OptionalString(b, `,"retracted":`, ev.Retracted)
	return append(b, '}'), nil
}
