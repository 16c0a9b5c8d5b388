package jmespath

import (
	"strconv"
	"strings"
	"time"

	"github.com/jmespath-community/go-jmespath/pkg/functions"
)

// Times are RFC 3339 strings unless a function takes a layout; results are
// formatted as RFC 3339 (whole seconds), durations as time.Duration strings.

func timeArg(name string, a []any, i int) (time.Time, error) {
	s, err := stringArg(name, a, i)
	if err != nil {
		return time.Time{}, err
	}
	t, err := time.Parse(time.RFC3339, s)
	if err != nil {
		return time.Time{}, fnWrap(name, err)
	}
	return t, nil
}

func durationArg(name string, a []any, i int) (time.Duration, error) {
	s, err := stringArg(name, a, i)
	if err != nil {
		return 0, err
	}
	d, err := time.ParseDuration(s)
	if err != nil {
		return 0, fnWrap(name, err)
	}
	return d, nil
}

func noArgs(name string, a []any) error {
	if len(a) != 0 {
		return fnErrorf(name, "expects no arguments, got %d", len(a))
	}
	return nil
}

// time_since(layout, start, end string) string: end minus start as a
// duration. An empty layout means RFC 3339; an empty end means now.
func jpTimeSince(o *options) functions.JpFunction {
	return func(a []any) (any, error) {
		const name = "time_since"
		layout, err := stringArg(name, a, 0)
		if err != nil {
			return nil, err
		}
		start, err := stringArg(name, a, 1)
		if err != nil {
			return nil, err
		}
		end, err := stringArg(name, a, 2)
		if err != nil {
			return nil, err
		}
		if layout == "" {
			layout = time.RFC3339
		}
		t1, err := time.Parse(layout, start)
		if err != nil {
			return nil, fnWrap(name, err)
		}
		t2 := o.now()
		if end != "" {
			if t2, err = time.Parse(layout, end); err != nil {
				return nil, fnWrap(name, err)
			}
		}
		return t2.Sub(t1).String(), nil
	}
}

// time_now() string: the current time in RFC 3339.
func jpTimeNow(o *options) functions.JpFunction {
	return func(a []any) (any, error) {
		if err := noArgs("time_now", a); err != nil {
			return nil, err
		}
		return o.now().Format(time.RFC3339), nil
	}
}

// time_now_utc() string: the current UTC time in RFC 3339.
func jpTimeNowUTC(o *options) functions.JpFunction {
	return func(a []any) (any, error) {
		if err := noArgs("time_now_utc", a); err != nil {
			return nil, err
		}
		return o.now().UTC().Format(time.RFC3339), nil
	}
}

// time_add(time, duration string) string.
func jpTimeAdd(a []any) (any, error) {
	t, err := timeArg("time_add", a, 0)
	if err != nil {
		return nil, err
	}
	d, err := durationArg("time_add", a, 1)
	if err != nil {
		return nil, err
	}
	return t.Add(d).Format(time.RFC3339), nil
}

// time_parse(layout, value string) string: value, written in the Go layout,
// converted to RFC 3339. A layout that is an integer means value holds Unix
// epoch seconds; the result is then in UTC.
func jpTimeParse(a []any) (any, error) {
	const name = "time_parse"
	layout, err := stringArg(name, a, 0)
	if err != nil {
		return nil, err
	}
	value, err := stringArg(name, a, 1)
	if err != nil {
		return nil, err
	}
	if _, err := strconv.ParseInt(layout, 10, 64); err == nil {
		secs, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return nil, fnWrap(name, err)
		}
		return time.Unix(secs, 0).UTC().Format(time.RFC3339), nil
	}
	t, err := time.Parse(layout, value)
	if err != nil {
		return nil, fnWrap(name, err)
	}
	return t.Format(time.RFC3339), nil
}

// time_to_cron(time string) string: "minute hour day-of-month month
// day-of-week" of the time, in its own offset.
func jpTimeToCron(a []any) (any, error) {
	t, err := timeArg("time_to_cron", a, 0)
	if err != nil {
		return nil, err
	}
	fields := []int{t.Minute(), t.Hour(), t.Day(), int(t.Month()), int(t.Weekday())}
	parts := make([]string, len(fields))
	for i, f := range fields {
		parts[i] = strconv.Itoa(f)
	}
	return strings.Join(parts, " "), nil
}

// time_utc(time string) string: the same instant in UTC.
func jpTimeUTC(a []any) (any, error) {
	t, err := timeArg("time_utc", a, 0)
	if err != nil {
		return nil, err
	}
	return t.UTC().Format(time.RFC3339), nil
}

// time_diff(start, end string) string: end minus start as a duration.
func jpTimeDiff(a []any) (any, error) {
	t1, err := timeArg("time_diff", a, 0)
	if err != nil {
		return nil, err
	}
	t2, err := timeArg("time_diff", a, 1)
	if err != nil {
		return nil, err
	}
	return t2.Sub(t1).String(), nil
}

// time_before(a, b string) boolean: whether a is before b.
func jpTimeBefore(a []any) (any, error) {
	t1, err := timeArg("time_before", a, 0)
	if err != nil {
		return nil, err
	}
	t2, err := timeArg("time_before", a, 1)
	if err != nil {
		return nil, err
	}
	return t1.Before(t2), nil
}

// time_after(a, b string) boolean: whether a is after b.
func jpTimeAfter(a []any) (any, error) {
	t1, err := timeArg("time_after", a, 0)
	if err != nil {
		return nil, err
	}
	t2, err := timeArg("time_after", a, 1)
	if err != nil {
		return nil, err
	}
	return t1.After(t2), nil
}

// time_between(t, start, end string) boolean: whether t is strictly after
// start and strictly before end.
func jpTimeBetween(a []any) (any, error) {
	const name = "time_between"
	t, err := timeArg(name, a, 0)
	if err != nil {
		return nil, err
	}
	start, err := timeArg(name, a, 1)
	if err != nil {
		return nil, err
	}
	end, err := timeArg(name, a, 2)
	if err != nil {
		return nil, err
	}
	return t.After(start) && t.Before(end), nil
}

// time_truncate(time, duration string) string: time rounded down to a
// multiple of duration (since the zero time, as time.Time.Truncate).
func jpTimeTruncate(a []any) (any, error) {
	t, err := timeArg("time_truncate", a, 0)
	if err != nil {
		return nil, err
	}
	d, err := durationArg("time_truncate", a, 1)
	if err != nil {
		return nil, err
	}
	return t.Truncate(d).Format(time.RFC3339), nil
}
