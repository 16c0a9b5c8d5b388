package document

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strconv"

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
//
// The stream is cut into documents at their markers (a line that starts
// with "---" or "..."), which YAML reserves wherever they appear, before
// any document is parsed. Next parses each piece as it is read; a caller
// that wants to parse on several cores takes the pieces with NextChunk and
// decodes them with Chunk.Decode, in any order and on any goroutine.
type Decoder struct {
	r *bufio.Reader
	// max is the limit per document; 0 is none.
	max int64
	// line is the number of the next line to read, from 1.
	line int
	// index is the position of the next document in the stream.
	index int
	// pending holds the lines read since the last document ended.
	pending pieceBuilder
	// err is the error that stopped the stream: Next keeps returning it.
	err error
	// rest is what is left of the last line read after a lone CR, which
	// ends a line of its own (readLine), and restErr the error that came
	// with that line, returned with its last piece.
	rest    []byte
	restErr error
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
		d.max = n
		return nil
	}
}

// readBuffer is the size of the buffer NewDecoder puts around a reader:
// the decoder reads at most this much ahead of the document it returns.
const readBuffer = 32 << 10

// NewDecoder returns a decoder reading r, buffered unless r is a
// *bufio.Reader already.
func NewDecoder(r io.Reader, opts ...DecoderOption) (*Decoder, error) {
	br, ok := r.(*bufio.Reader)
	if !ok {
		br = bufio.NewReaderSize(r, readBuffer)
	}
	d := &Decoder{r: br, line: 1}
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
	for {
		c, err := d.NextChunk()
		if err != nil {
			return Doc{}, err
		}
		doc, ok, err := c.Decode()
		if err != nil {
			d.err = err
			return Doc{}, err
		}
		if ok {
			return doc, nil
		}
	}
}

// Chunk is the text of one document of a stream, not yet parsed.
type Chunk struct {
	// Data is the document's text, its markers included.
	Data []byte
	// Index is the position of the document in its stream, from 0.
	Index int
	// Line is the line of Data's first byte in the stream, from 1.
	Line int
	// bare is set for content after a "..." without a "---" before it,
	// which YAML does not allow.
	bare bool
}

// NextChunk returns the text of the next document, empty ones included,
// or io.EOF after the last. It does not parse the document: a syntax
// error is found by Chunk.Decode. A document over the size limit, or an
// error reading the stream, is an error, and ends the stream.
func (d *Decoder) NextChunk() (Chunk, error) {
	if d.err != nil {
		return Chunk{}, d.err
	}
	c, err := d.nextChunk()
	if err != nil {
		d.err = err
		return Chunk{}, err
	}
	return c, nil
}

// pieceBuilder gathers the lines of one document.
type pieceBuilder struct {
	data []byte
	// line is the stream line of data's first byte.
	line int
	// explicit is set once a "---" line started the document.
	explicit bool
	// content is set once a line other than a blank line, a comment or
	// (before the document starts) a directive was read.
	content bool
	// afterEnd is set when the document before ended with "...": then
	// only a "---" may start the next.
	afterEnd bool
}

// counts reports whether the lines gathered make a document of their own:
// a "---" started it or it has content. Comments, blank lines and
// directives before a "---" belong to the document that "---" starts.
func (p *pieceBuilder) counts() bool { return p.explicit || p.content }

func (d *Decoder) nextChunk() (Chunk, error) {
	for {
		line, err := d.readLine()
		if len(line) > 0 {
			if c, ok := d.take(line); ok {
				return c, nil
			}
			if d.max > 0 && int64(len(d.pending.data)) > d.max {
				return Chunk{}, fmt.Errorf("document %d: %w: over %d bytes", d.index+1, ErrDocumentTooLarge, d.max)
			}
		}
		switch {
		case errors.Is(err, io.EOF):
			if len(d.pending.data) > 0 {
				// Trailing comments are no document, but the parser
				// still judges their bytes.
				return d.finish(), nil
			}
			return Chunk{}, io.EOF
		case err != nil:
			return Chunk{}, fmt.Errorf("document %d: %w", d.index+1, err)
		}
	}
}

// readLine reads one line, its end included. A line ends at LF, CRLF or
// a lone CR, YAML's three line breaks: the parser reading the stream
// whole takes a "---" after a lone CR for a marker, so the split must
// too. A line longer than the size limit is cut there (the document is
// too large either way).
func (d *Decoder) readLine() ([]byte, error) {
	if len(d.rest) == 0 {
		if err := d.restErr; err != nil {
			d.restErr = nil
			return nil, err
		}
		line, err := d.readLF()
		if bytes.IndexByte(line, '\r') < 0 {
			return line, err
		}
		d.rest, d.restErr = line, err
	}
	// What is left of a line read, held until its pieces are taken: the
	// reader is not read again until then, so the slice stays valid.
	line := d.rest
	if i := loneCR(line); i >= 0 {
		line = line[:i+1]
	}
	d.rest = d.rest[len(line):]
	if len(d.rest) == 0 {
		err := d.restErr
		d.restErr = nil
		return line, err
	}
	return line, nil
}

// loneCR returns the index of the first CR in line that is not followed
// by LF, or -1.
func loneCR(line []byte) int {
	for off := 0; ; {
		i := bytes.IndexByte(line[off:], '\r')
		if i < 0 {
			return -1
		}
		i += off
		if i+1 == len(line) || line[i+1] != '\n' {
			return i
		}
		off = i + 1
	}
}

// readLF reads up to and including the next LF, or to the end of the
// stream. A line longer than the size limit is cut there.
func (d *Decoder) readLF() ([]byte, error) {
	var long []byte
	for {
		frag, err := d.r.ReadSlice('\n')
		if !errors.Is(err, bufio.ErrBufferFull) {
			if long == nil {
				return frag, err
			}
			return append(long, frag...), err
		}
		long = append(long, frag...)
		if d.max > 0 && int64(len(long)) > d.max {
			return long, nil
		}
	}
}

// take adds a line to the pending document. When the line ends a document
// (a "---" after a document, or "..."), it returns that document.
func (d *Decoder) take(line []byte) (Chunk, bool) {
	p := &d.pending
	at := d.line
	if end := line[len(line)-1]; end == '\n' || end == '\r' {
		d.line++
	}
	switch {
	case marker(line, '-'):
		var c Chunk
		done := p.counts()
		if done {
			c = d.finish()
		}
		if len(p.data) == 0 {
			p.line = at
		}
		p.data = append(p.data, line...)
		p.explicit = true
		return c, done
	case marker(line, '.'):
		if len(p.data) == 0 {
			p.line = at
		}
		if p.afterEnd && !p.counts() && ignorable(line[3:], true) {
			// The parser skips a "..." that follows a document's end.
			// Made a comment, the line stays for the parser to judge
			// its bytes and count its lines.
			p.data = append(append(p.data, '#'), line[1:]...)
			return Chunk{}, false
		}
		p.data = append(p.data, line...)
		if p.counts() {
			c := d.finish()
			d.pending.afterEnd = true
			return c, true
		}
		// A "..." with no document before it is the parser's to judge,
		// with what follows it.
		p.content = true
		return Chunk{}, false
	}
	if len(p.data) == 0 {
		p.line = at
	}
	p.data = append(p.data, line...)
	if !p.content && !ignorable(line, p.explicit) {
		p.content = true
	}
	return Chunk{}, false
}

// finish returns the pending document and starts the next.
func (d *Decoder) finish() Chunk {
	p := &d.pending
	c := Chunk{Data: p.data, Index: d.index, Line: p.line, bare: p.afterEnd && !p.explicit && p.content}
	d.index++
	d.pending = pieceBuilder{}
	return c
}

// marker reports whether line is a document marker: "---" (c is '-') or
// "..." (c is '.') at the start of a line, followed by a blank or the end
// of the line.
func marker(line []byte, c byte) bool {
	if len(line) < 3 || line[0] != c || line[1] != c || line[2] != c {
		return false
	}
	if len(line) == 3 {
		return true
	}
	switch line[3] {
	case ' ', '\t', '\r', '\n':
		return true
	}
	return false
}

// ignorable reports whether a line holds nothing that makes a document:
// blanks, a comment, a byte order mark, or, before a "---", a directive.
func ignorable(line []byte, explicit bool) bool {
	line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf"))
	t := bytes.TrimLeft(line, " \t\r\n")
	if len(t) == 0 || t[0] == '#' {
		return true
	}
	return !explicit && line[0] == '%'
}

// Decode parses the document. ok is false for an empty document (only
// comments, or nothing after its "---"). A document that does not parse,
// or that is not a mapping, is an error naming its position in the stream.
func (c Chunk) Decode() (Doc, bool, error) {
	if c.bare {
		return Doc{}, false, fmt.Errorf("document %d: yaml: line %d: did not find expected <document start>", c.Index+1, c.Line)
	}
	if m, line, empty, ok := decodeBlock(c.Data); ok {
		if empty {
			return Doc{}, false, nil
		}
		return Doc{Object: m, Index: c.Index, Line: line + c.Line - 1}, true, nil
	}
	yd := yaml.NewDecoder(bytes.NewReader(c.Data))
	var n yaml.Node
	if err := yd.Decode(&n); err != nil {
		if errors.Is(err, io.EOF) {
			return Doc{}, false, nil
		}
		return Doc{}, false, fmt.Errorf("document %d: %w", c.Index+1, c.streamLines(err))
	}
	var extra yaml.Node
	switch err := yd.Decode(&extra); {
	case errors.Is(err, io.EOF):
	case err != nil:
		return Doc{}, false, fmt.Errorf("document %d: %w", c.Index+1, c.streamLines(err))
	default:
		// The markers cut the stream the way the parser does: a second
		// document here is a defect, and is not dropped in silence.
		return Doc{}, false, fmt.Errorf("document %d: the text holds a second document the decoder did not separate", c.Index+1)
	}
	line := n.Line + c.Line - 1
	v, err := (&decoder{budget: budgetFor(len(c.Data)), lineOffset: c.Line - 1}).fromNode(&n, 0)
	if err != nil {
		return Doc{}, false, fmt.Errorf("document %d (line %d): %w", c.Index+1, line, err)
	}
	if v == nil {
		return Doc{}, false, nil
	}
	m, ok := v.(map[string]any)
	if !ok {
		return Doc{}, false, fmt.Errorf("document %d (line %d): %w", c.Index+1, line, ErrNotObject)
	}
	return Doc{Object: m, Index: c.Index, Line: line}, true, nil
}

// yamlLine finds the line numbers the YAML parser puts in its messages.
var yamlLine = regexp.MustCompile(`\bline (\d+)\b`)

// streamLines turns the line numbers of a parser error, which count from
// the start of the chunk, into lines of the stream.
func (c Chunk) streamLines(err error) error {
	if c.Line == 1 {
		return err
	}
	msg := yamlLine.ReplaceAllStringFunc(err.Error(), func(m string) string {
		n, convErr := strconv.Atoi(m[len("line "):])
		if convErr != nil {
			return m
		}
		return "line " + strconv.Itoa(n+c.Line-1)
	})
	return &parseError{msg: msg, err: err}
}

// parseError is a parser error with its lines counted in the stream.
type parseError struct {
	msg string
	err error
}

func (e *parseError) Error() string { return e.msg }
func (e *parseError) Unwrap() error { return e.err }
