// Package document reads YAML and JSON documents into the engine's untyped
// form (map[string]any, []any, string, float64, bool, nil) and offers the
// small helpers every part of the engine needs on that form.
package document

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"

	yaml "go.yaml.in/yaml/v3"
)

// ErrNotObject is returned when a document is not a mapping.
var ErrNotObject = errors.New("document is not an object")

// Doc is one decoded document and where it came from.
type Doc struct {
	Object map[string]any
	// Index is the position of the document in its stream, from 0.
	Index int
	// Line is the first line of the document in its stream, from 1.
	Line int
}

// DecodeAll decodes every document of a multi-document YAML (or JSON)
// stream held in memory. Empty documents are skipped; a document that is
// not a mapping is an error naming its position. It returns the documents
// decoded before an error with the error. For a stream read from a file,
// Decoder reads one document at a time.
func DecodeAll(data []byte) ([]Doc, error) {
	dec, err := NewDecoder(bytes.NewReader(data))
	if err != nil {
		return nil, err
	}
	var docs []Doc
	for {
		d, err := dec.Next()
		if errors.Is(err, errIOEOF) {
			return docs, nil
		}
		if err != nil {
			return docs, err
		}
		docs = append(docs, d)
	}
}

// Decode decodes a single YAML or JSON value.
func Decode(data []byte) (any, error) {
	var n yaml.Node
	if err := yaml.Unmarshal(data, &n); err != nil {
		return nil, err
	}
	return (&decoder{budget: budgetFor(len(data))}).fromNode(&n, 0)
}

// decoder turns YAML nodes into values. Its budget bounds the values it
// builds, so that aliases cannot expand a small input exponentially (a
// "billion laughs" document).
type decoder struct {
	budget int
	// lineOffset turns the node's lines into lines of the whole stream.
	lineOffset int
}

// ErrTooLarge is returned when aliases expand a document beyond the
// decoding budget.
var ErrTooLarge = errors.New("document too large once its aliases are expanded")

// budgetFor allows a generous number of values per input byte.
func budgetFor(n int) int {
	return 1_000_000 + 64*n
}

const maxDepth = 512

func (d *decoder) fromNode(n *yaml.Node, depth int) (any, error) {
	d.budget--
	if d.budget < 0 {
		return nil, ErrTooLarge
	}
	if depth > maxDepth {
		return nil, errors.New("document nested too deeply")
	}
	switch n.Kind {
	case 0:
		return nil, nil
	case yaml.DocumentNode:
		if len(n.Content) == 0 {
			return nil, nil
		}
		return d.fromNode(n.Content[0], depth+1)
	case yaml.AliasNode:
		if n.Alias == nil {
			return nil, nil
		}
		return d.fromNode(n.Alias, depth+1)
	case yaml.SequenceNode:
		out := make([]any, 0, len(n.Content))
		for _, c := range n.Content {
			v, err := d.fromNode(c, depth+1)
			if err != nil {
				return nil, err
			}
			out = append(out, v)
		}
		return out, nil
	case yaml.MappingNode:
		out := make(map[string]any, len(n.Content)/2)
		for i := 0; i+1 < len(n.Content); i += 2 {
			k, vn := n.Content[i], n.Content[i+1]
			if k.Tag == "!!merge" || (k.Kind == yaml.ScalarNode && k.Value == "<<" && k.Tag != "!!str") {
				if err := d.mergeInto(out, vn, depth); err != nil {
					return nil, err
				}
				continue
			}
			if k.Kind != yaml.ScalarNode {
				return nil, fmt.Errorf("line %d: mapping key is not a scalar", k.Line+d.lineOffset)
			}
			v, err := d.fromNode(vn, depth+1)
			if err != nil {
				return nil, err
			}
			out[k.Value] = v
		}
		return out, nil
	case yaml.ScalarNode:
		return scalar(n)
	}
	return nil, fmt.Errorf("line %d: unsupported YAML node", n.Line+d.lineOffset)
}

func (d *decoder) mergeInto(out map[string]any, n *yaml.Node, depth int) error {
	v, err := d.fromNode(n, depth+1)
	if err != nil {
		return err
	}
	var maps []map[string]any
	switch t := v.(type) {
	case map[string]any:
		maps = append(maps, t)
	case []any:
		for _, e := range t {
			if m, ok := e.(map[string]any); ok {
				maps = append(maps, m)
			}
		}
	}
	for _, m := range maps {
		for k, val := range m {
			if _, exists := out[k]; !exists {
				out[k] = val
			}
		}
	}
	return nil
}

func scalar(n *yaml.Node) (any, error) {
	switch n.ShortTag() {
	case "!!null":
		return nil, nil
	case "!!bool":
		return strings.EqualFold(n.Value, "true"), nil
	case "!!int":
		s := strings.ReplaceAll(n.Value, "_", "")
		if i, err := strconv.ParseInt(s, 0, 64); err == nil {
			return float64(i), nil
		}
		if u, err := strconv.ParseUint(s, 0, 64); err == nil {
			return float64(u), nil
		}
		f, err := strconv.ParseFloat(s, 64)
		if err != nil {
			return n.Value, nil
		}
		return f, nil
	case "!!float":
		switch strings.ToLower(n.Value) {
		case ".inf", "+.inf":
			return math.Inf(1), nil
		case "-.inf":
			return math.Inf(-1), nil
		case ".nan":
			return math.NaN(), nil
		}
		f, err := strconv.ParseFloat(strings.ReplaceAll(n.Value, "_", ""), 64)
		if err != nil {
			return n.Value, nil
		}
		return f, nil
	default:
		// strings, timestamps and binary stay as written.
		return n.Value, nil
	}
}
