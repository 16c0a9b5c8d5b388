package jmespath

import (
	"testing"
)

func TestStringFunctions(t *testing.T) {
	i := newTestInterpreter(t)
	runSearchCases(t, i, map[string]searchCase{
		// compare
		"compare equal":        {expr: "compare('a', 'a')", want: 0.0},
		"compare less":         {expr: "compare('a', 'b')", want: -1.0},
		"compare greater":      {expr: "compare('b', 'a')", want: 1.0},
		"compare non string":   {expr: "compare('a', `1`)", wantErr: ErrFunction},
		"compare arity":        {expr: "compare('a')", wantErr: ErrFunction},
		"compare from data":    {expr: "compare(a, b)", data: map[string]any{"a": "x", "b": "y"}, want: -1.0},
		"compare missing data": {expr: "compare(a, b)", data: map[string]any{"a": "x"}, wantErr: ErrFunction},

		// equal_fold
		"equal_fold true":       {expr: "equal_fold('pizza', 'pIzZa')", want: true},
		"equal_fold false":      {expr: "equal_fold('pizza', 'APPLE')", want: false},
		"equal_fold unicode":    {expr: "equal_fold('Straße', 'STRAßE')", want: true},
		"equal_fold non string": {expr: "equal_fold(`true`, 'true')", wantErr: ErrFunction},

		// replace
		"replace two": {
			expr: "replace('Lorem ipsum dolor sit amet foo ipsum bar ipsum', 'ipsum', 'muspi', `2`)",
			want: "Lorem muspi dolor sit amet foo muspi bar ipsum",
		},
		"replace all with -1":    {expr: "replace('a-a-a', '-', '+', `-1`)", want: "a+a+a"},
		"replace zero":           {expr: "replace('a-a-a', '-', '+', `0`)", want: "a-a-a"},
		"replace fractional n":   {expr: "replace('a-a-a', '-', '+', `1.9`)", want: "a+a-a"},
		"replace needs 4 args":   {expr: "replace('a-a-a', '-', '+')", wantErr: ErrFunction},
		"replace non numeric n":  {expr: "replace('a', 'a', 'b', '1')", wantErr: ErrFunction},
		"replace_all":            {expr: "replace_all('Lorem ipsum dolor sit amet', 'ipsum', 'muspi')", want: "Lorem muspi dolor sit amet"},
		"replace_all empty old":  {expr: "replace_all('ab', '', '-')", want: "-a-b-"},
		"replace_all wrong type": {expr: "replace_all('ab', `1`, '-')", wantErr: ErrFunction},

		// case
		"to_upper":          {expr: "to_upper('abc-Déf')", want: "ABC-DÉF"},
		"to_lower":          {expr: "to_lower('ABC-Déf')", want: "abc-déf"},
		"to_upper non str":  {expr: "to_upper(`1`)", wantErr: ErrFunction},
		"to_lower null arg": {expr: "to_lower(missing)", data: map[string]any{}, wantErr: ErrFunction},

		// trim, trim_prefix
		"trim cutset":            {expr: "trim('¡¡¡Hello, Gophers!!!', '!¡')", want: "Hello, Gophers"},
		"trim ends only":         {expr: "trim('foocorpcom', 'o')", want: "foocorpcom"},
		"trim several":           {expr: "trim('foocorpcom', 'mcof')", want: "rp"},
		"trim needs cutset":      {expr: "trim('  a  ')", wantErr: ErrFunction},
		"trim_prefix":            {expr: "trim_prefix('docker://kubevirt/fedora', 'docker://')", want: "kubevirt/fedora"},
		"trim_prefix no prefix":  {expr: "trim_prefix('kubevirt/fedora', 'docker://')", want: "kubevirt/fedora"},
		"trim_prefix wrong type": {expr: "trim_prefix('a', `{}`)", wantErr: ErrFunction},

		// split: Kyverno's two-argument version replaces the standard one
		"split":                {expr: "split('cat,dog,horse', ',')", want: []any{"cat", "dog", "horse"}},
		"split empty string":   {expr: "split('', ',')", want: []any{""}},
		"split empty sep":      {expr: "split('abc', '')", want: []any{"a", "b", "c"}},
		"split no separator":   {expr: "split('abc', ',')", want: []any{"abc"}},
		"split third argument": {expr: "split('a,b,c', ',', `1`)", wantErr: ErrFunction},
		"split path": {
			expr: "to_string(@) | split(@, '/') | [1]",
			data: "/foo/bar", want: "foo",
		},

		// truncate
		"truncate":             {expr: "truncate('foobar', `3`)", want: "foo"},
		"truncate longer":      {expr: "truncate('foo', `10`)", want: "foo"},
		"truncate zero":        {expr: "truncate('foo', `0`)", want: ""},
		"truncate negative":    {expr: "truncate('foo', `-1`)", want: ""},
		"truncate runes":       {expr: "truncate('héllo', `2`)", want: "hé"},
		"truncate fractional":  {expr: "truncate('foobar', `2.7`)", want: "fo"},
		"truncate string len":  {expr: "truncate('foobar', '3')", wantErr: ErrFunction},
		"truncate pipe":        {expr: "metadata.name | truncate(@, `9`)", data: mustJSON(t, `{"metadata":{"name":"averyveryverylongname"}}`), want: "averyvery"},
		"truncate nan literal": {expr: "truncate('foobar', to_number('NaN'))", wantErr: ErrFunction},

		// pattern_match
		"pattern_match star":        {expr: "pattern_match('158-7?-4*', '158-73-417')", want: true},
		"pattern_match no match":    {expr: "pattern_match('158-6?-3*', '158-73-417')", want: false},
		"pattern_match number":      {expr: "pattern_match('12*', `1234`)", want: true},
		"pattern_match question":    {expr: "pattern_match('a?c', 'ac')", want: false},
		"pattern_match empty":       {expr: "pattern_match('', '')", want: true},
		"pattern_match object":      {expr: "pattern_match('*', `{}`)", wantErr: ErrFunction},
		"pattern_match non pattern": {expr: "pattern_match(`1`, '1')", wantErr: ErrFunction},

		// regex_match
		"regex_match string":    {expr: "regex_match('^[1-7]$', '1')", want: true},
		"regex_match number":    {expr: "regex_match('^[1-7]$', `1`)", want: true},
		"regex_match float":     {expr: "regex_match('^1\\.5$', `1.5`)", want: true},
		"regex_match no match":  {expr: "regex_match('^[1-7]$', '8')", want: false},
		"regex_match bad regex": {expr: "regex_match('[', 'a')", wantErr: ErrFunction},
		"regex_match bool":      {expr: "regex_match('true', `true`)", wantErr: ErrFunction},

		// regex_replace_all(_literal)
		"regex_replace_all": {
			expr: "regex_replace_all('([0-9])([0-9])', 'hello im 42 months old', '${1}1')",
			want: "hello im 41 months old",
		},
		"regex_replace_all numbers": {expr: "regex_replace_all('2', `123`, `9`)", want: "193"},
		"regex_replace_all label": {
			expr: "regex_replace_all('([0-9])([0-9])', 'days_37', '${1}0')",
			want: "days_30",
		},
		"regex_replace_all bad regex": {expr: "regex_replace_all('(', 'a', 'b')", wantErr: ErrFunction},
		"regex_replace_all_literal": {
			expr: "regex_replace_all_literal('^(\\d{3}-?\\d{2}-?\\d{4})$', '123-45-6789', 'redacted')",
			want: "redacted",
		},
		"regex_replace_all_literal no expansion": {
			expr: "regex_replace_all_literal('^[^/]+', 'docker.io/nginx', '$1registry')",
			want: "$1registry/nginx",
		},
		"regex_replace_all_literal wrong type": {expr: "regex_replace_all_literal('a', `[]`, 'b')", wantErr: ErrFunction},

		// label_match
		"label_match same":  {expr: "label_match(`{\"dog\":\"lab\",\"color\":\"tan\"}`, `{\"color\":\"tan\",\"dog\":\"lab\"}`)", want: true},
		"label_match super": {expr: "label_match(`{\"dog\":\"lab\"}`, `{\"color\":\"tan\",\"weight\":\"chonky\",\"dog\":\"lab\"}`)", want: true},
		"label_match value": {expr: "label_match(`{\"dog\":\"lab\",\"color\":\"tan\"}`, `{\"color\":\"black\",\"dog\":\"lab\"}`)", want: false},
		"label_match key":   {expr: "label_match(`{\"cat\":\"lab\"}`, `{\"dog\":\"lab\"}`)", want: false},
		"label_match empty": {expr: "label_match(`{}`, `{\"dog\":\"lab\"}`)", want: true},
		"label_match nested values": {
			expr: "label_match(`{\"a\":{\"b\":[1]}}`, `{\"a\":{\"b\":[1]}}`)", want: true,
		},
		"label_match array": {expr: "label_match(`[]`, `{}`)", wantErr: ErrFunction},

		// to_boolean
		"to_boolean true":    {expr: "to_boolean('TruE')", want: true},
		"to_boolean false":   {expr: "to_boolean('FalsE')", want: false},
		"to_boolean invalid": {expr: "to_boolean('yes')", wantErr: ErrFunction},
		"to_boolean bool":    {expr: "to_boolean(`true`)", wantErr: ErrFunction},

		// base64
		"base64_encode":            {expr: "base64_encode('hello\nworld')", want: "aGVsbG8Kd29ybGQ="},
		"base64_decode":            {expr: "base64_decode('aGVsbG8Kd29ybGQ=')", want: "hello\nworld"},
		"base64_decode invalid":    {expr: "base64_decode('!!!')", wantErr: ErrFunction},
		"base64_decode unpadded":   {expr: "base64_decode('aGk')", wantErr: ErrFunction},
		"base64 round trip":        {expr: "base64_decode(base64_encode('Ünïcødé'))", want: "Ünïcødé"},
		"base64_encode non string": {expr: "base64_encode(`1`)", wantErr: ErrFunction},

		// path_canonicalize
		"path_canonicalize slashes": {expr: "path_canonicalize('/var//lib///kubelet')", want: "/var/lib/kubelet"},
		"path_canonicalize dots":    {expr: "path_canonicalize('/var/run/../run/./containerd/containerd.sock')", want: "/var/run/containerd/containerd.sock"},
		"path_canonicalize empty":   {expr: "path_canonicalize('')", want: ""},
		"path_canonicalize root":    {expr: "path_canonicalize('//')", want: "/"},
		"path_canonicalize number":  {expr: "path_canonicalize(`1`)", wantErr: ErrFunction},

		// parse_json, parse_yaml
		"parse_json array": {expr: "parse_json('[\"1001\",\"1002\"]')[*].to_number(@)", want: []any{1001.0, 1002.0}},
		"parse_json object": {
			expr: "parse_json('{\"a\": {\"b\": [1, true, null]}}').a.b",
			want: []any{1.0, true, nil},
		},
		"parse_json scalar":  {expr: "parse_json('3')", want: 3.0},
		"parse_json invalid": {expr: "parse_json('{')", wantErr: ErrFunction},
		"parse_json empty":   {expr: "parse_json('')", wantErr: ErrFunction},
		"parse_yaml": {
			expr: "metadata.annotations.pets | parse_yaml(@).species.isGoodBoi",
			data: mustJSON(t, `{"metadata":{"annotations":{"pets":"species:\n  dog: lab\n  isGoodBoi: false\n  height: 15\n"}}}`),
			want: false,
		},
		"parse_yaml numbers": {expr: "parse_yaml('a: 15\nb: [1, 2.5]')", want: map[string]any{"a": 15.0, "b": []any{1.0, 2.5}}},
		"parse_yaml invalid": {expr: "parse_yaml('a: [')", wantErr: ErrFunction},
		"parse_yaml number":  {expr: "parse_yaml(`1`)", wantErr: ErrFunction},

		// lookup
		"lookup object":          {expr: "lookup(`{\"key1\": \"value1\", \"key2\": \"value2\"}`, 'key2')", want: "value2"},
		"lookup object missing":  {expr: "lookup(`{\"key1\": \"value1\"}`, 'nope')", want: nil},
		"lookup array":           {expr: "lookup(`[\"item0\", \"item1\", \"item2\"]`, `1`)", want: "item1"},
		"lookup array oob":       {expr: "lookup(`[\"item0\"]`, `5`)", want: nil},
		"lookup array negative":  {expr: "lookup(`[\"item0\"]`, `-1`)", want: nil},
		"lookup array fraction":  {expr: "lookup(`[\"item0\"]`, `0.5`)", wantErr: ErrFunction},
		"lookup array by string": {expr: "lookup(`[\"item0\"]`, '0')", wantErr: ErrFunction},
		"lookup object by num":   {expr: "lookup(`{\"1\": 1}`, `1`)", wantErr: ErrFunction},
		"lookup string":          {expr: "lookup('abc', `1`)", wantErr: ErrFunction},
		"lookup dynamic key": {
			expr: "lookup(annotations, join('', ['container.apparmor.security.beta.kubernetes.io/', name]))",
			data: mustJSON(t, `{"name":"c1","annotations":{"container.apparmor.security.beta.kubernetes.io/c1":"unconfined"}}`),
			want: "unconfined",
		},

		// items: Kyverno's three-argument version replaces the standard one
		"items object": {
			expr: "items(@, 'key', 'value')",
			data: mustJSON(t, `{"team":"apple","organization":"banana"}`),
			want: []any{
				map[string]any{"key": "organization", "value": "banana"},
				map[string]any{"key": "team", "value": "apple"},
			},
		},
		"items array": {
			expr: "items(@, 'key', 'value')",
			data: mustJSON(t, `[{"team":"apple"},{"organization":"banana"}]`),
			want: []any{
				map[string]any{"key": 0.0, "value": map[string]any{"team": "apple"}},
				map[string]any{"key": 1.0, "value": map[string]any{"organization": "banana"}},
			},
		},
		"items empty":        {expr: "items(`{}`, 'k', 'v')", want: []any{}},
		"items one argument": {expr: "items(`{\"a\": 1}`)", wantErr: ErrFunction},
		"items string":       {expr: "items('abc', 'k', 'v')", wantErr: ErrFunction},

		// object_from_lists
		"object_from_lists": {
			expr: "object_from_lists(env[].name, env[].value)",
			data: mustJSON(t, `{"env":[{"name":"KEY","value":"123-456-789"},{"name":"endpoint","value":"licensing.corp.org"}]}`),
			want: map[string]any{"KEY": "123-456-789", "endpoint": "licensing.corp.org"},
		},
		"object_from_lists short values": {
			expr: "object_from_lists(`[\"a\", \"b\"]`, `[1]`)",
			want: map[string]any{"a": 1.0, "b": nil},
		},
		"object_from_lists scalar keys": {
			expr: "object_from_lists(`[1, true]`, `[\"x\", \"y\"]`)",
			want: map[string]any{"1": "x", "true": "y"},
		},
		"object_from_lists object key": {expr: "object_from_lists(`[{}]`, `[1]`)", wantErr: ErrFunction},
		"object_from_lists not array":  {expr: "object_from_lists('a', `[1]`)", wantErr: ErrFunction},

		// hashes
		"sha256": {
			expr: "sha256('alertmanager-kube-prometheus-stack-alertmanager')",
			want: "75c07bb807f2d80a85d34880b8af0c5f29f7c27577076ed5d0e4b427dee7dbcc",
		},
		"sha256 empty":    {expr: "sha256('')", want: "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		"sha256 number":   {expr: "sha256(`1`)", wantErr: ErrFunction},
		"md5":             {expr: "md5('hello')", want: "5d41402abc4b2a76b9719d911017c592"},
		"md5 wrong arity": {expr: "md5('a', 'b')", wantErr: ErrFunction},

		// semver_compare
		"semver equal":        {expr: "semver_compare('1.2.3', '1.2.3')", want: true},
		"semver not equal":    {expr: "semver_compare('1.2.3', '1.2.4')", want: false},
		"semver x range":      {expr: "semver_compare('4.1.3', '>=4.1.x')", want: true},
		"semver negation":     {expr: "semver_compare('4.1.3', '!4.x.x')", want: false},
		"semver and":          {expr: "semver_compare('1.8.6', '>1.0.0 <2.0.0')", want: true},
		"semver or":           {expr: "semver_compare('2.1.5', '<2.0.0 || >=3.0.0')", want: false},
		"semver bad range":    {expr: "semver_compare('1.2.3', 'not a range')", wantErr: ErrFunction},
		"semver bad version":  {expr: "semver_compare('v1.2.3', '>=0.0.0 <0.0.1')", want: true},
		"semver non string":   {expr: "semver_compare(`1`, '1.0.0')", wantErr: ErrFunction},
		"semver prerelease":   {expr: "semver_compare('1.0.0-rc.1', '<1.0.0')", want: true},
		"semver build ignore": {expr: "semver_compare('1.0.0+build.5', '=1.0.0')", want: true},
	})
}
