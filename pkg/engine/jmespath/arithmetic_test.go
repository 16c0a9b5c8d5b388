package jmespath

import (
	"testing"
)

func TestArithmeticFunctions(t *testing.T) {
	i := newTestInterpreter(t)
	runSearchCases(t, i, map[string]searchCase{
		// add
		"add numbers":              {expr: "add(`1`, `2.5`)", want: 3.5},
		"add quantities":           {expr: "add('1Gi', '1Gi')", want: "2Gi"},
		"add mixed units":          {expr: "add('1Gi', '512Mi')", want: "1536Mi"},
		"add millicores":           {expr: "add('250m', '1')", want: "1250m"},
		"add durations":            {expr: "add('1h', '30s')", want: "1h0m30s"},
		"add minutes in durations": {expr: "add('1h', '30m')", want: "1h30m0s"},
		"add ambiguous m is milli": {expr: "add('1m', '1m')", want: "2m"},
		"add zero to duration":     {expr: "add('0', '1h')", want: "1h0m0s"},
		"add zero to quantity":     {expr: "add('0', '1Gi')", want: "1Gi"},
		"add quantity and number":  {expr: "add('10Mi', `1`)", wantErr: ErrFunction},
		"add duration and number":  {expr: "add('1h', `5`)", wantErr: ErrFunction},
		"add quantity duration":    {expr: "add('1Gi', '1h')", wantErr: ErrFunction},
		"add garbage string":       {expr: "add('abc', `1`)", wantErr: ErrFunction},
		"add object":               {expr: "add(`{}`, `1`)", wantErr: ErrFunction},
		"add null":                 {expr: "add(missing, `1`)", data: map[string]any{}, wantErr: ErrFunction},
		"add arity":                {expr: "add(`1`)", wantErr: ErrFunction},
		"add from document": {
			expr: "add(requests.memory, limits.memory)",
			data: mustJSON(t, `{"requests":{"memory":"100Mi"},"limits":{"memory":"200Mi"}}`),
			want: "300Mi",
		},
		"add duration overflow": {expr: "add('2562047h', '2562047h')", wantErr: ErrFunction},

		// subtract
		"subtract numbers":    {expr: "subtract(`10`, `2.5`)", want: 7.5},
		"subtract quantities": {expr: "subtract('10Mi', '5Ki')", want: "10235Ki"},
		"subtract negative":   {expr: "subtract('1Gi', '2Gi')", want: "-1Gi"},
		"subtract durations":  {expr: "subtract('2h', '30m')", want: "1h30m0s"},
		"subtract mixed":      {expr: "subtract('2h', `1`)", wantErr: ErrFunction},
		"subtract garbage":    {expr: "subtract('2h', 'x')", wantErr: ErrFunction},

		// multiply
		"multiply numbers":           {expr: "multiply(`3`, `4`)", want: 12.0},
		"multiply quantity":          {expr: "multiply('10Mi', `2`)", want: "20Mi"},
		"multiply quantity commutes": {expr: "multiply(`2`, '10Mi')", want: "20Mi"},
		"multiply millicores":        {expr: "multiply('250m', `2`)", want: "500m"},
		"multiply quantity fraction": {expr: "multiply('1Gi', `0.5`)", want: "512Mi"},
		"multiply duration":          {expr: "multiply('1h', `1.5`)", want: "1h30m0s"},
		"multiply duration commutes": {expr: "multiply(`2`, '30s')", want: "1m0s"},
		"multiply two quantities":    {expr: "multiply('1Gi', '1Gi')", wantErr: ErrFunction},
		"multiply two durations":     {expr: "multiply('1h', '1h')", wantErr: ErrFunction},
		"multiply duration overflow": {expr: "multiply('1h', `1e12`)", wantErr: ErrFunction},
		"multiply replicas":          {expr: "multiply(nodecount, `2`)", data: map[string]any{"nodecount": 3.0}, want: 6.0},

		// divide
		"divide numbers":            {expr: "divide(`10`, `4`)", want: 2.5},
		"divide by zero":            {expr: "divide(`1`, `0`)", wantErr: ErrFunction},
		"divide quantities":         {expr: "divide('10Mi', '5Ki')", want: 2048.0},
		"divide ratio":              {expr: "divide('250Mi', '100Mi')", want: 2.5},
		"divide quantity by number": {expr: "divide('10Mi', `2`)", want: "5Mi"},
		"divide quantity rounds":    {expr: "divide('3', `2`)", want: "1"},
		"divide quantity scale":     {expr: "divide('1.5', `2`)", want: "700m"},
		"divide quantity by zero":   {expr: "divide('1Gi', '0')", wantErr: ErrFunction},
		"divide quantity by 0 num":  {expr: "divide('1Gi', `0`)", wantErr: ErrFunction},
		"divide durations":          {expr: "divide('1h', '30m')", want: 2.0},
		"divide duration by number": {expr: "divide('1h', `4`)", want: "15m0s"},
		"divide duration by zero":   {expr: "divide('1h', '0s')", wantErr: ErrFunction},
		"divide number by quantity": {expr: "divide(`10`, '1Gi')", wantErr: ErrFunction},
		"divide number by duration": {expr: "divide(`10`, '1h')", wantErr: ErrFunction},
		"divide quantity duration":  {expr: "divide('1Gi', '1h')", wantErr: ErrFunction},
		"divide limits by requests": {
			expr: "divide(limits || '0', requests || '1m')",
			data: map[string]any{"limits": "1Gi"},
			want: 1073741824.0 / 0.001,
		},

		// modulo
		"modulo numbers":          {expr: "modulo(`10`, `3`)", want: 1.0},
		"modulo negative":         {expr: "modulo(`-10`, `3`)", want: -1.0},
		"modulo fractional":       {expr: "modulo(`10.5`, `3`)", wantErr: ErrFunction},
		"modulo by zero":          {expr: "modulo(`10`, `0`)", wantErr: ErrFunction},
		"modulo quantities":       {expr: "modulo('10Mi', '3Mi')", want: "1Mi"},
		"modulo quantities exact": {expr: "modulo('1Gi', '256Mi')", want: "0"},
		"modulo quantity frac":    {expr: "modulo('1.5', '1')", wantErr: ErrFunction},
		"modulo quantity by zero": {expr: "modulo('10', '0')", wantErr: ErrFunction},
		"modulo durations":        {expr: "modulo('1h', '25m')", want: "10m0s"},
		"modulo duration by zero": {expr: "modulo('1h', '0s')", wantErr: ErrFunction},
		"modulo mixed":            {expr: "modulo('10Mi', `3`)", wantErr: ErrFunction},
		"modulo huge":             {expr: "modulo(`1e300`, `3`)", wantErr: ErrFunction},

		// sum: Kyverno's version replaces the standard one
		"sum numbers":       {expr: "sum(input)", data: mustJSON(t, `{"input":[6,3,8]}`), want: 17.0},
		"sum fractions":     {expr: "sum(`[1.5, 2.5]`)", want: 4.0},
		"sum quantities":    {expr: "sum(input)", data: mustJSON(t, `{"input":["2Ki","5Gi","8Mi"]}`), want: "5251074Ki"},
		"sum durations":     {expr: "sum(input)", data: mustJSON(t, `{"input":["2h","50s","90s"]}`), want: "2h2m20s"},
		"sum durations m":   {expr: "sum(`[\"1h\", \"1m\"]`)", want: "1h1m0s"},
		"sum single":        {expr: "sum(`[\"1Gi\"]`)", want: "1Gi"},
		"sum single number": {expr: "sum(`[5]`)", want: 5.0},
		"sum single bad":    {expr: "sum(`[\"abc\"]`)", wantErr: ErrFunction},
		"sum empty":         {expr: "sum(`[]`)", wantErr: ErrFunction},
		"sum mixed":         {expr: "sum(`[\"1Gi\", 1]`)", wantErr: ErrFunction},
		"sum not array":     {expr: "sum('1Gi')", wantErr: ErrFunction},
		"sum memory requests": {
			expr: "sum(spec.containers[].resources.requests.memory)",
			data: mustJSON(t, `{"spec":{"containers":[{"resources":{"requests":{"memory":"512Mi"}}},{"resources":{"requests":{"memory":"1Gi"}}}]}}`),
			want: "1536Mi",
		},

		// round
		"round two places":    {expr: "round(`10.125`, `2`)", want: 10.13},
		"round variable":      {expr: "round(input, `2`)", data: map[string]any{"input": 10.123456}, want: 10.12},
		"round integer":       {expr: "round(`1.5`, `0`)", want: 2.0},
		"round negative":      {expr: "round(`-1.5`, `0`)", want: -2.0},
		"round many places":   {expr: "round(`1.25`, `400`)", want: 1.25},
		"round negative dp":   {expr: "round(`1`, `-1`)", wantErr: ErrFunction},
		"round fractional dp": {expr: "round(`1`, `0.5`)", wantErr: ErrFunction},
		"round string":        {expr: "round('1', `1`)", wantErr: ErrFunction},
	})
}
