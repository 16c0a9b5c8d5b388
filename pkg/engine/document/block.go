package document

import (
	"math"
	"regexp"
	"strconv"
	"strings"
)

// The general YAML parser builds a node for every token before the
// decoder turns the nodes into values, at a few hundred nanoseconds per
// byte. Manifests are nearly always written in a small part of YAML: block
// mappings and sequences, one-line scalars, comments. decodeBlock reads that
// part directly into values, several times faster, and declines everything
// else (anchors, tags, block and multi-line scalars, escapes, flow
// collections with content, duplicate keys, tabs, non-ASCII text, ...),
// which the general parser then reads. It never returns a value the
// general parser would not: FuzzBlockAgrees compares the two.

// blockLine is one line of a document that holds more than a comment.
type blockLine struct {
	// indent is the number of leading spaces.
	indent int
	// text is the rest of the line, trailing blanks removed.
	text string
	// line is the line number in the document, from 1.
	line int
}

// decodeBlock decodes one document's text. ok is false when the document
// is not in the part of YAML it reads (or when it is not a mapping); then
// the general parser must read it. v is nil for an empty document. line is
// the line the parser gives the document node.
func decodeBlock(data []byte) (v map[string]any, line int, empty, ok bool) {
	for _, c := range data {
		// Tabs, carriage returns, control characters and anything
		// outside ASCII go to the general parser.
		if c >= 0x7f || (c < 0x20 && c != '\n') {
			return nil, 0, false, false
		}
	}
	text := string(data)
	lines := make([]blockLine, 0, strings.Count(text, "\n")+1)
	explicit := 0
	for n := 1; len(text) > 0; n++ {
		var l string
		if i := strings.IndexByte(text, '\n'); i >= 0 {
			l, text = text[:i], text[i+1:]
		} else {
			l, text = text, ""
		}
		body := strings.TrimLeft(l, " ")
		if body == "" || body[0] == '#' {
			continue
		}
		indent := len(l) - len(body)
		if indent == 0 {
			switch {
			case marker([]byte(body), '-'):
				// Only a "---" (with at most a comment) before any content.
				if len(lines) > 0 || explicit > 0 || !onlyComment(body[3:]) {
					return nil, 0, false, false
				}
				explicit = n
				continue
			case marker([]byte(body), '.'), body[0] == '%':
				return nil, 0, false, false
			}
		}
		lines = append(lines, blockLine{indent: indent, text: strings.TrimRight(body, " "), line: n})
	}
	if len(lines) == 0 {
		return nil, 0, true, true
	}
	line = lines[0].line
	if explicit > 0 {
		line = explicit
	}
	p := blockParser{lines: lines}
	if lines[0].indent != 0 || !p.isMappingLine(lines[0].text) {
		return nil, 0, false, false
	}
	m, ok := p.mapping(0, 0)
	if !ok || p.i != len(p.lines) {
		return nil, 0, false, false
	}
	return m, line, false, true
}

// onlyComment reports whether s is blanks and at most a comment.
func onlyComment(s string) bool {
	t := strings.TrimLeft(s, " ")
	return t == "" || (t[0] == '#' && len(t) < len(s))
}

type blockParser struct {
	lines []blockLine
	i     int
}

// isSeqItem reports whether text starts a block sequence entry.
func isSeqItem(text string) bool {
	return text == "-" || strings.HasPrefix(text, "- ")
}

// isMappingLine reports whether text is "key: value" or "key:".
func (p *blockParser) isMappingLine(text string) bool {
	_, _, ok := splitKey(text)
	return ok
}

// node reads the block node that starts at the current line, whose indent
// is more than parent.
func (p *blockParser) node(parent, depth int) (any, bool) {
	if depth > maxDepth || p.i >= len(p.lines) {
		return nil, false
	}
	l := p.lines[p.i]
	if l.indent <= parent {
		return nil, false
	}
	if isSeqItem(l.text) {
		return p.sequence(l.indent, depth)
	}
	if p.isMappingLine(l.text) {
		return p.mapping(l.indent, depth)
	}
	return nil, false
}

// sequence reads the entries "- ..." at indent n.
func (p *blockParser) sequence(n, depth int) ([]any, bool) {
	out := []any{}
	for p.i < len(p.lines) {
		l := p.lines[p.i]
		if l.indent < n || (l.indent == n && !isSeqItem(l.text)) {
			// The sequence ended; what follows is its parent's to read
			// (a sequence may sit at the indent of its key).
			break
		}
		if l.indent > n {
			return nil, false
		}
		rest := strings.TrimLeft(l.text[1:], " ")
		if rest != "" && rest[0] == '#' {
			rest = ""
		}
		if rest == "" {
			p.i++
			if p.i < len(p.lines) && p.lines[p.i].indent > n {
				v, ok := p.node(n, depth+1)
				if !ok {
					return nil, false
				}
				out = append(out, v)
				continue
			}
			out = append(out, nil)
			continue
		}
		// The entry's content starts on the line of its "-": read it as a
		// line of its own at the column where it starts.
		at := n + len(l.text) - len(rest)
		p.lines[p.i] = blockLine{indent: at, text: rest, line: l.line}
		if isSeqItem(rest) || p.isMappingLine(rest) {
			v, ok := p.node(at-1, depth+1)
			if !ok {
				return nil, false
			}
			out = append(out, v)
			continue
		}
		v, ok := scalarText(rest)
		if !ok {
			return nil, false
		}
		p.i++
		if p.i < len(p.lines) && p.lines[p.i].indent > n {
			// A continued scalar, or an error.
			return nil, false
		}
		out = append(out, v)
	}
	return out, true
}

// mapping reads the entries "key: value" at indent n.
func (p *blockParser) mapping(n, depth int) (map[string]any, bool) {
	if depth > maxDepth {
		return nil, false
	}
	out := map[string]any{}
	for p.i < len(p.lines) {
		l := p.lines[p.i]
		if l.indent < n {
			break
		}
		if l.indent > n {
			return nil, false
		}
		key, rest, ok := splitKey(l.text)
		if !ok {
			return nil, false
		}
		if _, dup := out[key]; dup {
			return nil, false
		}
		p.i++
		if rest != "" {
			v, ok := scalarText(rest)
			if !ok {
				return nil, false
			}
			if p.i < len(p.lines) && p.lines[p.i].indent > n {
				return nil, false
			}
			out[key] = v
			continue
		}
		var v any
		if p.i < len(p.lines) {
			next := p.lines[p.i]
			switch {
			case next.indent > n:
				if v, ok = p.node(n, depth+1); !ok {
					return nil, false
				}
			case next.indent == n && isSeqItem(next.text):
				if v, ok = p.sequence(n, depth+1); !ok {
					return nil, false
				}
			}
		}
		out[key] = v
	}
	return out, true
}

// splitKey splits "key: value" (or "key:") into the key and the value's
// text. ok is false when text is not such a line, or its key is not a
// plain or simply quoted scalar.
func splitKey(text string) (key, rest string, ok bool) {
	if text == "" {
		return "", "", false
	}
	var after string
	switch text[0] {
	case '\'', '"':
		k, tail, ok := quoted(text)
		if !ok {
			return "", "", false
		}
		tail = strings.TrimLeft(tail, " ")
		if !strings.HasPrefix(tail, ":") {
			return "", "", false
		}
		key, after = k, tail[1:]
	default:
		i := 0
		for {
			j := strings.IndexByte(text[i:], ':')
			if j < 0 {
				return "", "", false
			}
			i += j
			if i+1 == len(text) || text[i+1] == ' ' {
				break
			}
			i++
		}
		key = strings.TrimRight(text[:i], " ")
		if !plainStart(key) || strings.Contains(key, " #") || len(key) > 1024 || key == "<<" {
			return "", "", false
		}
		after = text[i+1:]
	}
	if after != "" && after[0] != ' ' {
		return "", "", false
	}
	rest = strings.TrimLeft(after, " ")
	if rest != "" && rest[0] == '#' {
		rest = ""
	}
	return key, rest, true
}

// plainStart reports whether s may be a plain scalar as far as its first
// characters go.
func plainStart(s string) bool {
	if s == "" {
		return false
	}
	switch s[0] {
	case ',', '[', ']', '{', '}', '#', '&', '*', '!', '|', '>', '\'', '"', '%', '@', '`', '?', ':':
		return false
	case '-':
		return len(s) > 1 && s[1] != ' '
	}
	return true
}

// quoted reads the one-line quoted scalar at the start of text and returns
// its value and the text after it. Escapes in double quotes are the
// general parser's to read.
func quoted(text string) (string, string, bool) {
	q := text[0]
	if q == '"' {
		j := strings.IndexByte(text[1:], '"')
		if j < 0 || strings.IndexByte(text[1:1+j], '\\') >= 0 {
			return "", "", false
		}
		return text[1 : 1+j], text[2+j:], true
	}
	var b strings.Builder
	for i := 1; i < len(text); i++ {
		if text[i] != '\'' {
			continue
		}
		if i+1 < len(text) && text[i+1] == '\'' {
			b.WriteString(text[1 : i+1])
			text = text[i+1:]
			i = 0
			continue
		}
		if b.Len() == 0 {
			return text[1:i], text[i+1:], true
		}
		b.WriteString(text[1:i])
		return b.String(), text[i+1:], true
	}
	return "", "", false
}

// scalarText reads a value written on the line of its key or "-": a
// quoted or plain scalar, or an empty flow mapping or sequence, with at
// most a comment after it.
func scalarText(text string) (any, bool) {
	switch text[0] {
	case '\'', '"':
		v, tail, ok := quoted(text)
		if !ok || !onlyComment(tail) {
			return nil, false
		}
		return v, true
	case '{', '[':
		// Flow collections with content are the general parser's.
		switch {
		case strings.HasPrefix(text, "{}") && onlyComment(text[2:]):
			return map[string]any{}, true
		case strings.HasPrefix(text, "[]") && onlyComment(text[2:]):
			return []any{}, true
		}
		return nil, false
	}
	if i := strings.Index(text, " #"); i >= 0 {
		text = strings.TrimRight(text[:i], " ")
	}
	if !plainStart(text) || strings.Contains(text, ": ") || strings.HasSuffix(text, ":") {
		return nil, false
	}
	return resolvePlain(text)
}

// yamlFloat is the form of a float the YAML parser resolves.
var yamlFloat = regexp.MustCompile(`^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$`)

// resolvePlain gives a plain scalar the value the general parser and
// scalar give it: null, a bool, a number (float64) or the string. ok is
// false for the few forms left to the general parser (timestamps, merge
// keys, numbers with underscores or a base written the parser's own way).
func resolvePlain(s string) (any, bool) {
	switch s {
	case "~", "null", "Null", "NULL":
		return nil, true
	case "true", "True", "TRUE":
		return true, true
	case "false", "False", "FALSE":
		return false, true
	case ".nan", ".NaN", ".NAN":
		return math.NaN(), true
	case ".inf", ".Inf", ".INF", "+.inf", "+.Inf", "+.INF":
		return math.Inf(1), true
	case "-.inf", "-.Inf", "-.INF":
		return math.Inf(-1), true
	case "<<":
		return nil, false
	}
	c := s[0]
	numeric := c == '+' || c == '-' || c == '.' || (c >= '0' && c <= '9')
	if !numeric {
		return s, true
	}
	if strings.IndexByte(s, '_') >= 0 {
		return nil, false
	}
	if !numberChars(s) {
		// A character no number has (as in "500m" or "256Mi"): the
		// parsers below would all fail.
		return s, true
	}
	if c == '.' {
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return f, true
		}
		return s, true
	}
	if len(s) > 4 && s[4] == '-' && digits(s[:4]) {
		// Perhaps a timestamp.
		return nil, false
	}
	if i, err := strconv.ParseInt(s, 0, 64); err == nil {
		return float64(i), true
	}
	if u, err := strconv.ParseUint(s, 0, 64); err == nil {
		return float64(u), true
	}
	if last := s[len(s)-1]; (last == '.' || (last >= '0' && last <= '9')) && yamlFloat.MatchString(s) {
		// (A YAML float ends with a digit or a dot: "500m" is no float.)
		if f, err := strconv.ParseFloat(s, 64); err == nil {
			return f, true
		}
	}
	for _, prefix := range []string{"0b", "-0b", "0o", "-0o"} {
		if strings.HasPrefix(s, prefix) {
			return nil, false
		}
	}
	return s, true
}

// numberChars reports whether every character of s may be part of a
// number the parser reads (digits, hexadecimal digits, base prefixes,
// signs, dots, exponents).
func numberChars(s string) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if (c < '0' || c > '9') && (c < 'a' || c > 'f') && (c < 'A' || c > 'F') && !strings.ContainsRune("xXoO+-.", rune(c)) {
			return false
		}
	}
	return true
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
