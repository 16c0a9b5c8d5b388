package document

import (
	"errors"
	"fmt"
	"io"

	yaml "go.yaml.in/yaml/v3"
)

var (
	// ErrDocumentTooLarge is returned (wrapped) by Decoder.Next for a
	// document larger than the decoder's limit.
	ErrDocumentTooLarge = errors.New("document too large")
	// ErrInvalidOption is wrapped by the errors of invalid decoder
	// options.
	ErrInvalidOption = errors.New("invalid decoder option")
)

// Decoder reads the documents of a YAML (or JSON) stream one at a time:
// the stream is read as the documents are asked for, never whole, and only
// the current document is held. It decodes the way DecodeAll does.
type Decoder struct {
	src   *meteredReader
	yd    *yaml.Decoder
	index int
	// err is the error that stopped the stream: Next keeps returning it.
	err error
}

// DecoderOption configures a Decoder.
type DecoderOption func(*Decoder) error

// WithMaxDocumentBytes limits the size of one document, so that a stream
// cannot make the decoder hold more than about n bytes of input (plus the
// values they decode to) at a time. A larger document is an error wrapping
// ErrDocumentTooLarge. By default documents are not limited.
func WithMaxDocumentBytes(n int64) DecoderOption {
	return func(d *Decoder) error {
		if n <= 0 {
			return fmt.Errorf("%w: maximum document size must be positive, not %d", ErrInvalidOption, n)
		}
		d.src.max = n
		return nil
	}
}

// NewDecoder returns a decoder reading r. r is read in small pieces; wrap
// a file in a bufio.Reader.
func NewDecoder(r io.Reader, opts ...DecoderOption) (*Decoder, error) {
	src := &meteredReader{r: r}
	d := &Decoder{src: src, yd: yaml.NewDecoder(src)}
	for _, o := range opts {
		if err := o(d); err != nil {
			return nil, err
		}
	}
	return d, nil
}

// Next returns the next document that is not empty. Doc.Index counts every
// document of the stream, empty ones included. After the last document it
// returns io.EOF. A document that is not a mapping, or that does not
// parse, is an error naming its position; so is one over the size limit.
// After an error the stream cannot go on: Next returns the error again.
func (d *Decoder) Next() (Doc, error) {
	for d.err == nil {
		i := d.index
		d.index++
		d.src.startDocument()
		var n yaml.Node
		err := d.yd.Decode(&n)
		switch {
		case d.src.exceeded:
			d.err = fmt.Errorf("document %d: %w: over %d bytes", i+1, ErrDocumentTooLarge, d.src.max)
			continue
		case errors.Is(err, io.EOF):
			d.err = io.EOF
			continue
		case err != nil:
			d.err = fmt.Errorf("document %d: %w", i+1, err)
			continue
		}
		v, err := (&decoder{budget: budgetFor(int(d.src.n))}).fromNode(&n, 0)
		if err != nil {
			d.err = fmt.Errorf("document %d (line %d): %w", i+1, n.Line, err)
			continue
		}
		if v == nil {
			continue
		}
		m, ok := v.(map[string]any)
		if !ok {
			d.err = fmt.Errorf("document %d (line %d): %w", i+1, n.Line, ErrNotObject)
			continue
		}
		return Doc{Object: m, Index: i, Line: n.Line}, nil
	}
	return Doc{}, d.err
}

// meteredReader counts the bytes the YAML parser reads for the current
// document and refuses to read past the limit. The parser reads ahead a
// little (512 bytes at a time), so the count of a document may include the
// start of the next one, and miss its own start: the limit holds to within
// the parser's buffer (a few KiB).
type meteredReader struct {
	r io.Reader
	// max is the limit per document; 0 is none.
	max int64
	// n is the count since the current document started.
	n        int64
	exceeded bool
}

// errOverLimit stops the parser; Decoder.Next reports ErrDocumentTooLarge.
var errOverLimit = errors.New("document over the size limit")

func (m *meteredReader) startDocument() { m.n = 0 }

func (m *meteredReader) Read(p []byte) (int, error) {
	if m.max > 0 {
		// Up to max bytes are allowed, and one more to find out whether
		// the stream ends there.
		if m.n > m.max {
			m.exceeded = true
			return 0, errOverLimit
		}
		if left := m.max + 1 - m.n; int64(len(p)) > left {
			p = p[:left]
		}
	}
	n, err := m.r.Read(p)
	m.n += int64(n)
	return n, err
}
