package jmespath

import (
	"testing"
	"time"
)

func TestTimeFunctions(t *testing.T) {
	i := newTestInterpreter(t)
	runSearchCases(t, i, map[string]searchCase{
		// time_now, time_now_utc use the injected clock
		"time_now":           {expr: "time_now()", want: "2023-01-12T17:37:56-05:00"},
		"time_now_utc":       {expr: "time_now_utc()", want: "2023-01-12T22:37:56Z"},
		"time_now arguments": {expr: "time_now('x')", wantErr: ErrFunction},
		"time_now_utc args":  {expr: "time_now_utc(`1`)", wantErr: ErrFunction},

		// time_since
		"time_since rfc3339": {
			expr: "time_since('', '2022-04-10T03:14:05-07:00', '2022-04-11T03:14:05-07:00')",
			want: "24h0m0s",
		},
		"time_since unix date layout": {
			expr: "time_since('Mon Jan _2 15:04:05 MST 2006', 'Mon Jan 02 15:04:05 MST 2021', 'Mon Jan 10 03:14:16 MST 2021')",
			want: "180h10m11s",
		},
		"time_since helm layout": {expr: "time_since('2006-Jan-02', '2020-Jan-14', '2020-Jan-17')", want: "72h0m0s"},
		"time_since until now":   {expr: "time_since('', '2023-01-12T17:37:00-05:00', '')", want: "56s"},
		"time_since bad start":   {expr: "time_since('', 'yesterday', '')", wantErr: ErrFunction},
		"time_since bad end":     {expr: "time_since('', '2023-01-12T17:37:00-05:00', 'tomorrow')", wantErr: ErrFunction},
		"time_since two args":    {expr: "time_since('', '2023-01-12T17:37:00-05:00')", wantErr: ErrFunction},

		// time_add
		"time_add":              {expr: "time_add('2023-01-12T12:37:56-05:00', '6h')", want: "2023-01-12T18:37:56-05:00"},
		"time_add negative":     {expr: "time_add('2023-01-12T12:37:56Z', '-1h30m')", want: "2023-01-12T11:07:56Z"},
		"time_add bad duration": {expr: "time_add('2023-01-12T12:37:56Z', '1d')", wantErr: ErrFunction},
		"time_add bad time":     {expr: "time_add('2023-01-12', '1h')", wantErr: ErrFunction},
		"cleanup schedule": {
			expr: "time_add(time_now_utc(), '4h') | time_to_cron(@)",
			want: "37 2 13 1 5",
		},

		// time_parse
		"time_parse layout": {
			expr: "time_parse('Mon Jan 02 2006 15:04:05 -0700', 'Fri Jun 22 2022 17:45:00 +0100')",
			want: "2022-06-22T17:45:00+01:00",
		},
		"time_parse rfc3339": {
			expr: "time_parse('2006-01-02T15:04:05Z07:00', '2021-01-02T15:04:05-07:00')",
			want: "2021-01-02T15:04:05-07:00",
		},
		"time_parse epoch":         {expr: "time_parse('1702691171', '1702691171')", want: "2023-12-16T01:46:11Z"},
		"time_parse bad epoch":     {expr: "time_parse('1702691171', 'abc')", wantErr: ErrFunction},
		"time_parse wrong layout":  {expr: "time_parse('2006-01-02', '02/01/2006')", wantErr: ErrFunction},
		"time_parse number layout": {expr: "time_parse(`1`, '1')", wantErr: ErrFunction},

		// time_to_cron
		"time_to_cron":     {expr: "time_to_cron('2022-04-11T03:14:05-07:00')", want: "14 3 11 4 1"},
		"time_to_cron bad": {expr: "time_to_cron('04/11/2022')", wantErr: ErrFunction},

		// time_utc
		"time_utc west":  {expr: "time_utc('2021-01-02T18:04:05-05:00')", want: "2021-01-02T23:04:05Z"},
		"time_utc east":  {expr: "time_utc('2021-01-02T02:04:05+08:30')", want: "2021-01-01T17:34:05Z"},
		"time_utc wrong": {expr: "time_utc(`1`)", wantErr: ErrFunction},

		// time_diff
		"time_diff":          {expr: "time_diff('2023-01-10T00:00:00Z', '2023-01-11T00:00:00Z')", want: "24h0m0s"},
		"time_diff negative": {expr: "time_diff('2023-01-12T00:00:00Z', '2023-01-11T00:00:00Z')", want: "-24h0m0s"},
		"time_diff offsets":  {expr: "time_diff('2023-01-12T00:00:00-05:00', '2023-01-12T05:00:00Z')", want: "0s"},
		"time_diff bad":      {expr: "time_diff('2023-01-12', '2023-01-11T00:00:00Z')", wantErr: ErrFunction},

		// time_before, time_after, time_between
		"time_after true":        {expr: "time_after('2023-01-12T14:07:55-05:00', '2023-01-12T19:05:59Z')", want: true},
		"time_after false":       {expr: "time_after('2023-01-12T19:05:59Z', '2023-01-13T19:05:59Z')", want: false},
		"time_after bad":         {expr: "time_after('now', '2023-01-13T19:05:59Z')", wantErr: ErrFunction},
		"time_before true":       {expr: "time_before('2023-01-12T19:05:59Z', '2023-01-13T19:05:59Z')", want: true},
		"time_before false":      {expr: "time_before('2023-01-12T19:05:59Z', '2023-01-11T19:05:59Z')", want: false},
		"time_before with now":   {expr: "time_before(time_now_utc(), '2023-01-31T00:00:00Z')", want: true},
		"time_before bad":        {expr: "time_before('2023-01-12T19:05:59Z', `0`)", wantErr: ErrFunction},
		"time_between true":      {expr: "time_between('2023-01-12T19:05:59Z', '2023-01-01T19:05:59Z', '2023-01-15T19:05:59Z')", want: true},
		"time_between false":     {expr: "time_between('2023-01-12T19:05:59Z', '2023-01-01T19:05:59Z', '2023-01-11T19:05:59Z')", want: false},
		"time_between exclusive": {expr: "time_between('2023-01-01T00:00:00Z', '2023-01-01T00:00:00Z', '2023-01-15T00:00:00Z')", want: false},
		"time_between bad":       {expr: "time_between('2023-01-12T19:05:59Z', 'x', '2023-01-11T19:05:59Z')", wantErr: ErrFunction},

		// time_truncate
		"time_truncate hour":    {expr: "time_truncate('2023-01-12T17:37:00Z', '1h')", want: "2023-01-12T17:00:00Z"},
		"time_truncate 2 hours": {expr: "time_truncate('2023-01-12T17:37:00Z', '2h')", want: "2023-01-12T16:00:00Z"},
		"time_truncate bad":     {expr: "time_truncate('2023-01-12T17:37:00Z', 'hour')", wantErr: ErrFunction},
	})
}

func TestTimeNowDefaultsToRealClock(t *testing.T) {
	i, err := New()
	if err != nil {
		t.Fatal(err)
	}
	got, err := i.Search("time_now_utc()", nil)
	if err != nil {
		t.Fatal(err)
	}
	s, ok := got.(string)
	if !ok {
		t.Fatalf("time_now_utc() = %#v, want a string", got)
	}
	ts, err := time.Parse(time.RFC3339, s)
	if err != nil {
		t.Fatalf("time_now_utc() = %q is not RFC 3339: %v", s, err)
	}
	if d := time.Since(ts); d < -time.Minute || d > time.Minute {
		t.Fatalf("time_now_utc() = %q is %s away from now", s, d)
	}
}
