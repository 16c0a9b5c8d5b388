package conditions

import (
	"errors"
	"testing"
)

type evalCase struct {
	key   any
	value any
	want  bool
}

func runCases(t *testing.T, operator string, tests map[string]evalCase) {
	t.Helper()
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := Evaluate(tc.key, operator, tc.value)
			if err != nil {
				t.Fatalf("Evaluate(%#v, %s, %#v): unexpected error %v", tc.key, operator, tc.value, err)
			}
			if got != tc.want {
				t.Fatalf("Evaluate(%#v, %s, %#v) = %v, want %v", tc.key, operator, tc.value, got, tc.want)
			}
		})
	}
}

var equalsCases = map[string]evalCase{
	"bool true":                   {true, true, true},
	"bool differ":                 {true, false, false},
	"bool vs string":              {true, "true", false},
	"number":                      {42.0, 42.0, true},
	"number differ":               {42.0, 43.0, false},
	"number vs int":               {42.0, 42, true},
	"number vs fraction":          {42.0, 42.5, false},
	"number vs numeric string":    {42.0, "42", true},
	"float vs numeric string":     {3.14, "3.14", true},
	"number vs bad string":        {42.0, "invalid", false},
	"number vs bool":              {1.0, true, false},
	"string":                      {"hello", "hello", true},
	"string differ":               {"hello", "world", false},
	"wildcard value":              {"hello-world", "hello-*", true},
	"wildcard value miss":         {"goodbye-world", "hello-*", false},
	"wildcard suffix":             {"api-prod", "*-prod", true},
	"wildcard question":           {"v1", "v?", true},
	"non empty wildcard":          {"x", "?*", true},
	"non empty wildcard empty":    {"", "?*", false},
	"wildcard only in value":      {"*-prod", "api-prod", false},
	"string vs number":            {"hello", 123.0, false},
	"quantity":                    {"100Mi", "100Mi", true},
	"quantity other unit":         {"1Gi", "1024Mi", true},
	"quantity differ":             {"100Mi", "200Mi", false},
	"quantity milli":              {"0.5", "500m", true},
	"quantity vs non quantity":    {"100Mi", "not-a-quantity", false},
	"numeric key vs wildcard":     {"100", "1*", false}, // Kyverno: quantity key, unparsable value
	"numeric string vs number":    {"5", 5.0, true},
	"numeric string vs other":     {"5", 6.0, false},
	"duration":                    {"1h", "60m", true},
	"duration differ":             {"1h", "30m", false},
	"duration vs seconds":         {"60s", 60.0, true},
	"minute beats milli":          {"1m", "60s", true},
	"zero is not a duration":      {"0", "0s", false},
	"map":                         {map[string]any{"foo": "bar"}, map[string]any{"foo": "bar"}, true},
	"map differ":                  {map[string]any{"foo": "bar"}, map[string]any{"foo": "baz"}, false},
	"map nested numbers":          {map[string]any{"a": []any{1.0, "x"}}, map[string]any{"a": []any{1, "x"}}, true},
	"map vs string":               {map[string]any{"foo": "bar"}, "not a map", false},
	"map extra key":               {map[string]any{"a": 1.0}, map[string]any{"a": 1.0, "b": nil}, false},
	"list":                        {[]any{"a", "b", "c"}, []any{"a", "b", "c"}, true},
	"list order":                  {[]any{"a", "b"}, []any{"b", "a"}, false},
	"list length":                 {[]any{"a", "b", "c"}, []any{"a", "b"}, false},
	"list vs string":              {[]any{"a"}, "a", false},
	"list no wildcards":           {[]any{"a*"}, []any{"abc"}, false},
	"null key":                    {nil, nil, false},
	"null key vs string":          {nil, "", false},
	"empty string vs empty":       {"", "", true},
	"empty string vs star":        {"", "*", true},
	"int key normalised":          {int64(7), "7", true},
	"string dot is literal":       {"nginxX1", "nginx.1", false},
	"multibyte question wildcard": {"é", "?", true},
}

func TestEquals(t *testing.T) {
	runCases(t, OpEquals, equalsCases)
	// The deprecated alias and any casing select the same handler.
	runCases(t, OpEqual, equalsCases)
	runCases(t, "equals", equalsCases)
}

func TestNotEquals(t *testing.T) {
	tests := map[string]evalCase{
		"bool":                      {true, false, true},
		"bool same":                 {true, true, false},
		"bool vs string":            {true, "true", true},
		"number":                    {42.0, 43.0, true},
		"number vs fraction":        {5.0, 5.5, true},
		"number vs numeric string":  {5.0, "5", false},
		"number vs bad string":      {5.0, "five", true},
		"string":                    {"hello", "world", true},
		"string same":               {"hello", "hello", false},
		"wildcard":                  {"api-prod", "*-prod", false},
		"quantity vs non quantity":  {"100Mi", "not-a-quantity", true},
		"quantity same":             {"1Gi", "1024Mi", false},
		"numeric string vs number":  {"5", 5.0, false},
		"numeric string vs other":   {"5", 6.0, true},
		"duration":                  {"1h", "30m", true},
		"duration same":             {"1h", "3600s", false},
		"map":                       {map[string]any{"foo": "bar"}, map[string]any{"foo": "baz"}, true},
		"map vs string":             {map[string]any{}, "x", true},
		"list":                      {[]any{"a", "b"}, []any{"a", "c"}, true},
		"list same":                 {[]any{"a", "b"}, []any{"a", "b"}, false},
		"null key is never decided": {nil, "x", false},
		"null key vs null":          {nil, nil, false},
	}
	runCases(t, OpNotEquals, tests)
	runCases(t, OpNotEqual, tests)
}

func TestAnyIn(t *testing.T) {
	runCases(t, OpAnyIn, map[string]evalCase{
		"string same":                  {"kyverno", "kyverno", true},
		"string in list with wildcard": {"kube-system", []any{"default", "kube-*"}, true},
		"wildcard key in list":         {"kube-*", []any{"kube-system"}, true},
		"string not in value":          {"kyverno", "default", false},
		"number in string":             {64.0, "64", true},
		"number in list":               {1.0, []any{1.0, 2.0, 3.0}, true},
		"int in list":                  {1, []any{1, 2, 3}, true},
		"number not in":                {64.0, "default", false},
		"float in string":              {3.14, "3.14", true},
		"float in list":                {2.2, []any{1.1, 2.2, 3.3}, true},
		"bool in string":               {true, "true", true},
		"big number text":              {1000000.0, []any{"1000000"}, false}, // %v gives 1e+06
		"list all match wildcard":      {[]any{"kube-system", "kube-public"}, "kube-*", true},
		"list partially in":            {[]any{"kube-system", "default"}, "kube-system", true},
		"list none in":                 {[]any{"default", "kyverno"}, "kube-*", false},
		"lists any in":                 {[]any{"default", "kyverno"}, []any{"kube-*", "ky*"}, true},
		"lists none in":                {[]any{"default", "kyverno"}, []any{"kube-*", "kube-system"}, false},
		"empty list key":               {[]any{}, []any{"default", "kyverno"}, false},
		"empty string key":             {"", []any{"default", "kyverno"}, false},
		"map key unsupported":          {map[string]any{"foo": "bar"}, "test", false},
		"null key":                     {nil, []any{"a"}, false},
		"scalar vs number value":       {80.0, 80.0, false},
		"list vs number value":         {[]any{80.0, 443.0}, 80.0, true},
		"list vs bool value":           {[]any{true}, true, true},
		"string vs map value":          {"a", map[string]any{"a": 1.0}, false},
		"range in":                     {"5", "1-10", true},
		"range below":                  {"0", "1-10", false},
		"range bound":                  {"10", "1-10", true},
		"number in range":              {5.0, "1-10", true},
		"list any in range":            {[]any{"0", "5"}, "1-10", true},
		"list none in range":           {[]any{"0", "20"}, "1-10", false},
		"list numbers in range":        {[]any{0.0, 8080.0}, "8000-9000", true},
		"quantity range":               {"512Mi", "256Mi-1Gi", true},
		"quantity range out":           {"2Gi", "256Mi-1Gi", false},
		"duration range":               {"90m", "1h-2h", true},
		"negative range":               {"-3", "-5-5", true},
		"json array string":            {"apple", `["apple", "banana"]`, true},
		"json array string miss":       {"cherry", `["apple", "banana"]`, false},
		"list in json array":           {[]any{"apple", "cherry"}, `["apple", "banana"]`, true},
		"list not in json array":       {[]any{"cherry", "date"}, `["apple", "banana"]`, false},
		"json but not strings":         {"1", `[1, 2]`, false},
		"comma string is one item":     {"a", "a,b", false},
		"single item list equal":       {[]any{"x"}, "x", true},
	})
}

func TestAnyNotIn(t *testing.T) {
	runCases(t, OpAnyNotIn, map[string]evalCase{
		"string same":                    {"kyverno", "kyverno", false},
		"string in list with wildcard":   {"kube-system", []any{"default", "kube-*"}, false},
		"string not in value":            {"kyverno", "default", true},
		"number in string":               {64.0, "64", false},
		"number in list":                 {1.0, []any{1.0, 2.0, 3.0}, false},
		"number not in":                  {64.0, "default", true},
		"float in string":                {3.14, "3.14", false},
		"bool key bool value":            {true, true, false}, // unsupported value type
		"list all in":                    {[]any{"kube-system", "kube-public"}, "kube-*", false},
		"list partially in":              {[]any{"kube-system", "default"}, "kube-system", true},
		"list none in":                   {[]any{"default", "kyverno"}, "kube-*", true},
		"numbers partially in scalar":    {[]any{1.0, 2.0, 3.0}, 2.0, true},
		"numbers not in scalar":          {[]any{1.0, 2.0, 3.0}, 4.0, true},
		"bools partially in":             {[]any{true, false}, true, true},
		"bool not in":                    {[]any{true}, false, true},
		"single number in scalar":        {[]any{2.0}, 2.0, false},
		"lists not in":                   {[]any{"default", "kyverno"}, []any{"kube-*", "kube-system"}, true},
		"lists partially in":             {[]any{"default", "kyverno"}, []any{"kube-*", "ky*"}, true},
		"empty list key":                 {[]any{}, []any{"default", "kyverno"}, false},
		"empty string key":               {"", []any{"default", "kyverno"}, true},
		"single item list equal":         {[]any{"x"}, "x", false},
		"list range all inside":          {[]any{"2", "3"}, "1-10", false},
		"list range one outside":         {[]any{"2", "30"}, "1-10", true},
		"scalar range inside":            {"5", "1-10", false},
		"scalar range outside":           {"50", "1-10", true},
		"host ports inside allowed":      {[]any{0.0}, "0-0", false},
		"host ports outside allowed":     {[]any{0.0, 8080.0}, "0-0", true},
		"invalid value type is not true": {"x", 5.0, false},
	})
}

func TestAllIn(t *testing.T) {
	runCases(t, OpAllIn, map[string]evalCase{
		"string same":             {"kyverno", "kyverno", true},
		"string in list":          {"kube-system", []any{"default", "kube-*"}, true},
		"string not in":           {"kyverno", "default", false},
		"number in string":        {64.0, "64", true},
		"list all in wildcard":    {[]any{"kube-system", "kube-public"}, "kube-*", true},
		"list partially in":       {[]any{"kube-system", "default"}, "kube-system", false},
		"lists all in":            {[]any{"a", "b"}, []any{"a", "b", "c"}, true},
		"lists all in wildcard":   {[]any{"default", "kyverno"}, []any{"def*", "ky*"}, true},
		"lists one missing":       {[]any{"a", "d"}, []any{"a", "b", "c"}, false},
		"empty list key":          {[]any{}, []any{"a"}, true},
		"list all in range":       {[]any{"2", "3"}, "1-10", true},
		"list one out of range":   {[]any{"2", "30"}, "1-10", false},
		"scalar in range":         {"3", "1-10", true},
		"json array":              {[]any{"a", "b"}, `["a","b","c"]`, true},
		"list vs number value":    {[]any{1.0}, 1.0, false}, // only AnyIn takes scalar numbers
		"single item list equal":  {[]any{"x"}, "x", true},
		"bool key":                {false, []any{"false"}, true},
		"map key unsupported":     {map[string]any{}, []any{"a"}, false},
		"capabilities all listed": {[]any{"CHOWN", "KILL"}, []any{"AUDIT_WRITE", "CHOWN", "KILL"}, true},
	})
}

func TestAllNotIn(t *testing.T) {
	runCases(t, OpAllNotIn, map[string]evalCase{
		"string same":              {"kyverno", "kyverno", false},
		"string in list":           {"kube-system", []any{"default", "kube-*"}, false},
		"string not in":            {"kyverno", "default", true},
		"number in string":         {64.0, "64", false},
		"number not in":            {64.0, "default", true},
		"list all in":              {[]any{"kube-system", "kube-public"}, "kube-*", false},
		"list partially in":        {[]any{"kube-system", "default"}, "kube-system", false},
		"list none in":             {[]any{"default", "kyverno"}, "kube-*", true},
		"lists none in":            {[]any{"default", "kyverno"}, []any{"kube-*", "kube-system"}, true},
		"lists partially in":       {[]any{"default", "kyverno"}, []any{"kube-*", "ky*"}, false},
		"list all outside range":   {[]any{"20", "30"}, "1-10", true},
		"list one inside range":    {[]any{"5", "30"}, "1-10", false},
		"single item list equal":   {[]any{"x"}, "x", false},
		"probes none present":      {[]any{"livenessProbe", "readinessProbe"}, []any{"name", "image"}, true},
		"invalid value type false": {"x", true, false},
	})
}

func TestInDeprecated(t *testing.T) {
	runCases(t, OpIn, map[string]evalCase{
		"string in list":              {"a", []any{"a", "b"}, true},
		"string wildcard in list":     {"kube-system", []any{"kube-*"}, true},
		"string pattern value":        {"kube-system", "kube-*", true},
		"string in json array":        {"a", `["a","b"]`, true},
		"string not json":             {"a", "b", false},
		"number in list":              {1.0, []any{"1"}, true},
		"bool key unsupported":        {true, []any{"true"}, false},
		"list subset":                 {[]any{"a", "b"}, []any{"a", "b", "c"}, true},
		"list not subset":             {[]any{"a", "d"}, []any{"a", "b", "c"}, false},
		"list no wildcards":           {[]any{"kube-system"}, []any{"kube-*"}, false},
		"list vs non string elements": {[]any{"1"}, []any{1.0}, false},
		"list single equal":           {[]any{"a"}, "a", true},
		"list json array":             {[]any{"a"}, `["a"]`, true},
	})
	runCases(t, OpNotIn, map[string]evalCase{
		"string in list":      {"a", []any{"a", "b"}, false},
		"string not in list":  {"c", []any{"a", "b"}, true},
		"string not json":     {"a", "b", false}, // unusable value
		"list one missing":    {[]any{"a", "d"}, []any{"a", "b", "c"}, true},
		"list all present":    {[]any{"a", "b"}, []any{"a", "b", "c"}, false},
		"list single equal":   {[]any{"a"}, "a", false},
		"map key unsupported": {map[string]any{}, []any{"a"}, false},
	})
}

func TestNumeric(t *testing.T) {
	runCases(t, OpGreaterThan, map[string]evalCase{
		"numbers":                 {5.0, 3.0, true},
		"numbers smaller":         {3.0, 5.0, false},
		"numbers equal":           {10.0, 10.0, false},
		"negative":                {-1.0, -5.0, true},
		"decimals":                {2.5, 2.4, true},
		"number vs string":        {30.0, "25", true},
		"number vs float string":  {10.0, "5.5", true},
		"number vs bad string":    {10.0, "ten", false},
		"number vs duration":      {3600.0, "30m", true},
		"string vs number":        {"10.5", 10.0, true},
		"strings numeric":         {"25.5", "20.0", true},
		"quantities cpu":          {"200m", "100m", true},
		"quantities memory":       {"1Gi", "512Mi", true},
		"quantities mixed":        {"1", "1Gi", false},
		"quantity vs number":      {"1Gi", 5.0, false}, // quantities compare only with strings
		"durations":               {"1h", "30m", true},
		"durations smaller":       {"30m", "1h", false},
		"duration vs seconds":     {"90s", 60.0, true},
		"semver":                  {"1.10.0", "1.9.2", true},
		"semver smaller":          {"1.2.0", "1.10.0", false},
		"semver vs number":        {"1.2.0", 1.0, false},
		"semver vs bad":           {"1.2.0", "latest", false},
		"bool":                    {true, false, false},
		"null":                    {nil, 1.0, false},
		"list":                    {[]any{"a"}, "100", false},
		"map":                     {map[string]any{"a": 1.0}, "1", false},
		"bad string":              {"abc", "1", false},
		"int key":                 {10, 5, true},
		"not a number key string": {"v1.2.3", "v1.0.0", false},
	})
	runCases(t, OpGreaterThanOrEquals, map[string]evalCase{
		"equal numbers":      {100.0, 100.0, true},
		"smaller":            {50.0, 100.0, false},
		"quantities equal":   {"500m", "0.5", true},
		"semver equal":       {"1.5.0", "1.5.0", true},
		"durations equal":    {"60m", "1h", true},
		"zero":               {0.0, 0.0, true},
		"zero string vs 0.0": {"0", 0.0, true},
	})
	runCases(t, OpLessThan, map[string]evalCase{
		"numbers":          {2.0, 5.0, true},
		"equal":            {7.0, 7.0, false},
		"quantities":       {"256Mi", "1Gi", true},
		"semver prerelase": {"1.0.0-alpha", "1.0.0", true},
		"semver major":     {"2.0.0", "1.9.0", false},
		"duration":         {"30s", "1m", true},
	})
	runCases(t, OpLessThanOrEquals, map[string]evalCase{
		"numbers":    {100.0, 200.0, true},
		"equal":      {64.0, 64.0, true},
		"larger":     {150.0, 100.0, false},
		"quantities": {"2Gi", "2Gi", true},
	})
}

func TestDurationOperators(t *testing.T) {
	runCases(t, OpDurationGreaterThan, map[string]evalCase{
		"strings":               {"1h", "30m", true},
		"strings smaller":       {"10m", "1h", false},
		"seconds vs string":     {7200.0, "1h", true},
		"string vs seconds":     {"1h", 60.0, true},
		"seconds":               {10.0, 5.0, true},
		"fraction truncates":    {1.9, 1.0, false},
		"key not a duration":    {"abc", "1h", false},
		"value not a duration":  {"1h", "abc", false},
		"bare number string":    {"5", "1s", false},
		"bool key":              {true, "1h", false},
		"null value":            {"1h", nil, false},
		"microseconds notation": {"1500us", "1ms", true},
	})
	runCases(t, OpDurationGreaterThanOrEquals, map[string]evalCase{
		"equal": {"60m", "1h", true},
		"less":  {"59m", "1h", false},
	})
	runCases(t, OpDurationLessThan, map[string]evalCase{
		"less":  {"59m", "1h", true},
		"equal": {"1h", "60m", false},
	})
	runCases(t, OpDurationLessThanOrEquals, map[string]evalCase{
		"equal":   {"1h", "60m", true},
		"greater": {"2h", "60m", false},
	})
}

func TestOperatorNames(t *testing.T) {
	tests := map[string]struct {
		operator   string
		valid      bool
		deprecated bool
		evaluates  bool
	}{
		"Equals":                      {"Equals", true, false, true},
		"Equal alias":                 {"Equal", true, true, true},
		"NotEqual alias":              {"NotEqual", true, true, true},
		"In deprecated":               {"In", true, true, true},
		"NotIn deprecated":            {"NotIn", true, true, true},
		"AnyIn":                       {"AnyIn", true, false, true},
		"AllNotIn":                    {"AllNotIn", true, false, true},
		"GreaterThanOrEquals":         {"GreaterThanOrEquals", true, false, true},
		"DurationLessThanOrEquals":    {"DurationLessThanOrEquals", true, false, true},
		"lower case evaluates":        {"anyin", false, false, true},
		"mixed case evaluates":        {"greaterTHAN", false, false, true},
		"unknown":                     {"Contains", false, false, false},
		"empty":                       {"", false, false, false},
		"label selector Exists":       {"Exists", false, false, false},
		"GreaterThanOrEqual (no s)":   {"GreaterThanOrEqual", false, false, false},
		"trailing space is not valid": {"Equals ", false, false, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			if got := Valid(tc.operator); got != tc.valid {
				t.Errorf("Valid(%q) = %v, want %v", tc.operator, got, tc.valid)
			}
			if got := Deprecated(tc.operator); got != tc.deprecated {
				t.Errorf("Deprecated(%q) = %v, want %v", tc.operator, got, tc.deprecated)
			}
			_, err := Evaluate("a", tc.operator, "a")
			if tc.evaluates && err != nil {
				t.Errorf("Evaluate with %q: unexpected error %v", tc.operator, err)
			}
			if !tc.evaluates && !errors.Is(err, ErrUnknownOperator) {
				t.Errorf("Evaluate with %q: error %v, want ErrUnknownOperator", tc.operator, err)
			}
		})
	}
}

// TestPolicyIdioms runs conditions as the Pod Security Standards policies of
// the Kyverno library write them, on the values their JMESPath keys yield.
func TestPolicyIdioms(t *testing.T) {
	type cond struct {
		key      any
		operator string
		value    any
	}
	hostPortsDenied := func(ports []any) []cond {
		return []cond{
			{ports, OpAnyNotIn, "5000-6000"},
			{ports, OpAnyNotIn, []any{0.0}},
		}
	}
	tests := map[string]struct {
		all  []cond // deny when all hold
		deny bool
	}{
		"no host ports":            {hostPortsDenied([]any{}), false},
		"host port zero":           {hostPortsDenied([]any{0.0}), false},
		"host port in range":       {hostPortsDenied([]any{5500.0}), false},
		"host port bound":          {hostPortsDenied([]any{6000.0}), false},
		"host port out of range":   {hostPortsDenied([]any{8080.0}), true},
		"mixed ports":              {hostPortsDenied([]any{0.0, 5001.0, 7000.0}), true},
		"operation is not DELETE":  {[]cond{{"CREATE", OpNotEquals, "DELETE"}}, true},
		"operation DELETE":         {[]cond{{"DELETE", OpNotEquals, "DELETE"}}, false},
		"drop ALL missing":         {[]cond{{"ALL", OpAnyNotIn, []any{}}}, true},
		"drop ALL present":         {[]cond{{"ALL", OpAnyNotIn, []any{"NET_RAW", "ALL"}}}, false},
		"allowed volume types":     {[]cond{{[]any{"name", "configMap", "name", "emptyDir"}, OpAnyNotIn, []any{"name", "configMap", "emptyDir", ""}}}, false},
		"hostPath volume type":     {[]cond{{[]any{"name", "hostPath"}, OpAnyNotIn, []any{"name", "configMap", "emptyDir", ""}}}, true},
		"no volumes (default '')":  {[]cond{{"", OpAnyNotIn, []any{"name", "configMap", ""}}}, false},
		"capabilities not allowed": {[]cond{{[]any{"SYS_ADMIN"}, OpAnyNotIn, []any{"AUDIT_WRITE", "CHOWN", "KILL"}}}, true},
		"capabilities allowed":     {[]cond{{[]any{"CHOWN", "KILL"}, OpAnyNotIn, []any{"AUDIT_WRITE", "CHOWN", "KILL"}}}, false},
		"privileged in list":       {[]cond{{[]any{false, true}, OpAnyIn, []any{true}}}, true},
		"privileged absent":        {[]cond{{[]any{false}, OpAnyIn, []any{true}}}, false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			deny := true
			for _, c := range tc.all {
				ok, err := Evaluate(c.key, c.operator, c.value)
				if err != nil {
					t.Fatal(err)
				}
				deny = deny && ok
			}
			if deny != tc.deny {
				t.Fatalf("deny = %v, want %v", deny, tc.deny)
			}
		})
	}
}

func BenchmarkEvaluate(b *testing.B) {
	key := []any{"name", "configMap", "name", "hostPath"}
	value := []any{"name", "configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected", "secret", ""}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		if ok, _ := Evaluate(key, OpAnyNotIn, value); !ok {
			b.Fatal("want true")
		}
		if ok, _ := Evaluate([]any{8080.0}, OpAnyNotIn, "5000-6000"); !ok {
			b.Fatal("want true")
		}
	}
}
