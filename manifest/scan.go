package manifest

// This file is one cohesive thing, the streaming document scanner (over 400 lines): it splits
// YAML and JSON input into documents and List items one at a time, bounded by the per-document
// size limit, without holding more than one document in memory.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"sigs.k8s.io/yaml"
)

// docScanner splits a stream into documents the way kubectl does (YAML documents separated by
// "---" lines, or a stream of JSON values when it starts with "{"), with two differences: a
// document larger than max is an error instead of growing without bound, and the items of a
// List are handed out one at a time as they are read, so a 50 MB List costs one item of memory.
type docScanner struct {
	r      *bufio.Reader
	source string
	max    int64
	send   func(Document) error
	index  int
	// prefilter: see Options.Prefilter.
	prefilter []byte
}

func (s *docScanner) filtered(raw []byte) bool {
	return s.prefilter != nil && !bytes.Contains(raw, s.prefilter)
}

func (s *docScanner) tooLarge(item int) error {
	where := fmt.Sprintf("%s (document %d)", s.source, s.index)
	if item > 0 {
		where = fmt.Sprintf("%s (document %d, item %d)", s.source, s.index, item)
	}
	return inputErrorf("%s: larger than %s, the limit for one document (an object the API server accepts is at most 3 MiB): is this really YAML or JSON?", where, byteSize(s.max))
}

func (s *docScanner) run() error {
	// Like kubectl's YAMLOrJSONDecoder: a stream starting with "{" is JSON.
	for {
		b, err := s.r.Peek(1)
		if err != nil {
			return nil // empty input
		}
		switch b[0] {
		case ' ', '\t', '\r', '\n':
			_, _ = s.r.ReadByte()
			continue
		case '{':
			return s.runJSON()
		}
		return s.runYAML()
	}
}

// readLine returns the next line (with its newline), failing when the current document would
// grow past max. io.EOF only with an empty line.
func (s *docScanner) readLine(docLen int64, item int) ([]byte, error) {
	var line []byte
	for {
		chunk, err := s.r.ReadSlice('\n')
		if int64(len(line)+len(chunk))+docLen > s.max {
			return nil, s.tooLarge(item)
		}
		line = append(line, chunk...)
		switch {
		case err == nil:
			return line, nil
		case errors.Is(err, bufio.ErrBufferFull):
			continue
		case err == io.EOF && len(line) > 0:
			return line, nil
		default:
			return nil, err
		}
	}
}

// yamlDoc is the document being read: its lines outside a top-level items sequence (head), and
// what is known of its kind.
type yamlDoc struct {
	head     bytes.Buffer
	kind     string
	kindSeen bool
	// streamed is how many items were sent while the kind was not yet known.
	streamed int
	items    int
}

func (s *docScanner) runYAML() error {
	s.index = 1
	doc := &yamlDoc{}
	var item bytes.Buffer
	inItems, itemIndent := false, 0
	flushItem := func() error {
		if len(bytes.TrimSpace(stripComments(item.Bytes()))) == 0 {
			item.Reset() // comments before the first item
			return nil
		}
		doc.items++
		raw := item.Bytes()
		item.Reset()
		if !doc.kindSeen {
			doc.streamed++
		}
		return s.sendItem(raw, doc.items)
	}
	endDoc := func() error {
		if err := flushItem(); err != nil {
			return err
		}
		inItems = false
		if doc.streamed > 0 && !strings.HasSuffix(doc.kind, "List") {
			return inputErrorf("%s (document %d): has a top-level items list before its kind, and kind %q is not a List: put kind first, or make it a List", s.source, s.index, doc.kind)
		}
		if doc.items > 0 {
			// A List whose items were sent; the rest (apiVersion, kind, metadata) is not an object.
			s.index++
			*doc = yamlDoc{}
			return nil
		}
		raw := doc.head.Bytes()
		if len(bytes.TrimSpace(stripComments(raw))) == 0 {
			doc.head.Reset()
			return nil
		}
		sent, err := s.sendDoc(raw)
		if err != nil {
			return err
		}
		if sent {
			s.index++
		}
		*doc = yamlDoc{}
		return nil
	}
	for {
		var docLen int64
		if inItems {
			docLen = int64(item.Len())
		} else {
			docLen = int64(doc.head.Len())
		}
		itemNo := 0
		if inItems {
			itemNo = doc.items + 1
		}
		line, err := s.readLine(docLen, itemNo)
		if err == io.EOF {
			return endDoc()
		}
		if err != nil {
			if classified(err) {
				return err
			}
			return inputErrorf("%s: reading document %d: %v", s.source, s.index, err)
		}
		if bytes.HasPrefix(line, []byte("---")) {
			rest := bytes.TrimSpace(line[3:])
			if len(rest) > 0 && rest[0] != '#' {
				return inputErrorf("%s (document %d): invalid YAML document separator: %s", s.source, s.index+1, rest)
			}
			if err := endDoc(); err != nil {
				return err
			}
			continue
		}
		trimmed := bytes.TrimSpace(line)
		blank := len(trimmed) == 0 || trimmed[0] == '#'
		indent := len(line) - len(bytes.TrimLeft(line, " "))
		if inItems {
			switch {
			case blank || indent > itemIndent:
				item.Write(line)
				continue
			case indent == itemIndent && (trimmed[0] == '-' && (len(trimmed) == 1 || trimmed[1] == ' ')):
				if err := flushItem(); err != nil {
					return err
				}
				// "- apiVersion: v1" becomes "  apiVersion: v1": a mapping indented like the
				// rest of the item's lines.
				l := append([]byte{}, line...)
				l[indent] = ' '
				item.Write(l)
				continue
			default:
				if err := flushItem(); err != nil {
					return err
				}
				inItems = false
			}
		}
		if indent == 0 && !blank {
			key, value, _ := bytes.Cut(bytes.TrimRight(line, " \r\n"), []byte(":"))
			switch string(key) {
			case "kind":
				v, _, _ := bytes.Cut(value, []byte(" #"))
				doc.kind = strings.Trim(strings.TrimSpace(string(v)), `"'`)
				doc.kindSeen = true
			case "items":
				// A block sequence follows (a List), unless the kind already says it is not a
				// List: then items is an ordinary field and stays in the document.
				if len(bytes.TrimSpace(value)) == 0 && (!doc.kindSeen || strings.HasSuffix(doc.kind, "List")) {
					if next, ok := s.peekSequenceIndent(); ok {
						inItems, itemIndent = true, next
						continue
					}
				}
			}
		}
		doc.head.Write(line)
	}
}

// peekSequenceIndent looks at the next non-blank line: when it starts a block sequence ("- "),
// it returns that line's indentation.
func (s *docScanner) peekSequenceIndent() (int, bool) {
	for n := 64; n <= 64*1024; n *= 4 {
		b, _ := s.r.Peek(n)
		i := 0
		for i < len(b) {
			end := bytes.IndexByte(b[i:], '\n')
			if end < 0 {
				break
			}
			line := b[i : i+end]
			t := bytes.TrimSpace(line)
			if len(t) == 0 || t[0] == '#' {
				i += end + 1
				continue
			}
			indent := len(line) - len(bytes.TrimLeft(line, " "))
			return indent, t[0] == '-' && (len(t) == 1 || t[1] == ' ' || t[1] == '\r')
		}
		if len(b) < n {
			// The end of the input: a last line without a newline.
			t := bytes.TrimSpace(b[i:])
			if len(t) > 0 && t[0] == '-' {
				return len(b[i:]) - len(bytes.TrimLeft(b[i:], " ")), true
			}
			return 0, false
		}
	}
	return 0, false
}

// sendDoc converts a YAML document and sends it; a null document is not sent.
func (s *docScanner) sendDoc(raw []byte) (bool, error) {
	if s.filtered(raw) {
		return true, nil
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return false, inputErrorf("%s (document %d): malformed YAML: %v", s.source, s.index, trimYAMLError(err))
	}
	if bytes.Equal(bytes.TrimSpace(js), []byte("null")) {
		return false, nil
	}
	return true, s.sendJSONDoc(js)
}

// sendJSONDoc sends one whole document; a List read in one piece (JSON, flow style) is expanded.
func (s *docScanner) sendJSONDoc(js []byte) error {
	d := Document{Source: s.source, Index: s.index, JSON: js}
	js = bytes.TrimSpace(js)
	if len(js) > 0 && js[0] != '{' {
		what := "a scalar"
		if js[0] == '[' {
			what = "a list"
		}
		return inputErrorf("%s: not a Kubernetes object: %s, not a mapping with apiVersion and kind (several objects go in separate documents, or in a kind: List with items)", d.Where(), what)
	}
	if err := d.fillHead(); err != nil {
		return err
	}
	if strings.HasSuffix(d.Kind, "List") {
		var list struct {
			Items []json.RawMessage `json:"items"`
		}
		if json.Unmarshal(js, &list) == nil && list.Items != nil {
			for i, item := range list.Items {
				if err := s.sendItemJSON(item, i+1); err != nil {
					return err
				}
			}
			return nil
		}
	}
	return s.send(d)
}

func (s *docScanner) sendItem(raw []byte, item int) error {
	if s.filtered(raw) {
		return nil
	}
	js, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return inputErrorf("%s (document %d, item %d): malformed YAML: %v", s.source, s.index, item, trimYAMLError(err))
	}
	return s.sendItemJSON(js, item)
}

func (s *docScanner) sendItemJSON(js []byte, item int) error {
	if s.filtered(js) {
		return nil
	}
	d := Document{Source: s.source, Index: s.index, Item: item, JSON: js}
	if err := d.fillHead(); err != nil {
		return err
	}
	return s.send(d)
}

// runJSON reads a stream of JSON values. Objects are read field by field, so that the items of
// a List (kubectl get -o json) are sent one at a time.
func (s *docScanner) runJSON() error {
	lr := &docLimitReader{r: s.r, max: s.max}
	dec := json.NewDecoder(lr)
	dec.UseNumber()
	for s.index = 1; ; s.index++ {
		lr.reset()
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return s.jsonError(err, 0)
		}
		if d, ok := tok.(json.Delim); !ok || d != '{' {
			return inputErrorf("%s (document %d): not a Kubernetes object: want a JSON object with apiVersion and kind", s.source, s.index)
		}
		var out bytes.Buffer
		out.WriteByte('{')
		kind, items, fields := "", 0, 0
		for dec.More() {
			keyTok, err := dec.Token()
			if err != nil {
				return s.jsonError(err, 0)
			}
			key, _ := keyTok.(string)
			if key == "items" && (kind == "" || strings.HasSuffix(kind, "List")) {
				n, isList, raw, err := s.jsonItems(dec, lr)
				if err != nil {
					return err
				}
				if isList {
					items += n
					continue
				}
				if fields > 0 {
					out.WriteByte(',')
				}
				writeJSONField(&out, key, raw)
				fields++
				continue
			}
			var raw json.RawMessage
			if err := dec.Decode(&raw); err != nil {
				return s.jsonError(err, 0)
			}
			if key == "kind" {
				_ = json.Unmarshal(raw, &kind)
			}
			if fields > 0 {
				out.WriteByte(',')
			}
			writeJSONField(&out, key, raw)
			fields++
		}
		if _, err := dec.Token(); err != nil {
			return s.jsonError(err, 0)
		}
		out.WriteByte('}')
		if items > 0 || (kind != "" && strings.HasSuffix(kind, "List") && bytes.Contains(out.Bytes(), []byte(`"items":[]`))) {
			if !strings.HasSuffix(kind, "List") {
				return inputErrorf("%s (document %d): has a top-level items list before its kind, and kind %q is not a List: put kind first, or make it a List", s.source, s.index, kind)
			}
			continue
		}
		if s.filtered(out.Bytes()) {
			continue
		}
		if err := s.sendJSONDoc(out.Bytes()); err != nil {
			return err
		}
	}
}

// jsonItems reads the value of "items": a list is sent item by item (isList); anything else
// is returned whole.
func (s *docScanner) jsonItems(dec *json.Decoder, lr *docLimitReader) (int, bool, json.RawMessage, error) {
	if !dec.More() {
		return 0, false, nil, s.jsonError(io.ErrUnexpectedEOF, 0)
	}
	tok, err := dec.Token()
	if err != nil {
		return 0, false, nil, s.jsonError(err, 0)
	}
	switch t := tok.(type) {
	case json.Delim:
		if t != '[' {
			return 0, false, nil, inputErrorf("%s (document %d): items is an object, not a list", s.source, s.index)
		}
	default:
		raw, _ := json.Marshal(t)
		return 0, false, raw, nil
	}
	n := 0
	for dec.More() {
		lr.reset()
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			return n, true, nil, s.jsonError(err, n+1)
		}
		n++
		if err := s.sendItemJSON(raw, n); err != nil {
			return n, true, nil, err
		}
	}
	if _, err := dec.Token(); err != nil {
		return n, true, nil, s.jsonError(err, 0)
	}
	if n == 0 {
		return 0, false, json.RawMessage("[]"), nil
	}
	return n, true, nil, nil
}

func writeJSONField(b *bytes.Buffer, key string, raw []byte) {
	k, _ := json.Marshal(key)
	b.Write(k)
	b.WriteByte(':')
	b.Write(raw)
}

func (s *docScanner) jsonError(err error, item int) error {
	if classified(err) {
		return err
	}
	if errors.Is(err, errDocTooLarge) {
		return s.tooLarge(item)
	}
	where := fmt.Sprintf("%s (document %d)", s.source, s.index)
	if item > 0 {
		where = fmt.Sprintf("%s (document %d, item %d)", s.source, s.index, item)
	}
	if err == io.EOF || errors.Is(err, io.ErrUnexpectedEOF) {
		return inputErrorf("%s: malformed JSON: unexpected end of input", where)
	}
	return inputErrorf("%s: malformed JSON: %v", where, jsonErrorText(err))
}

var errDocTooLarge = errors.New("document too large")

// docLimitReader fails once more than max bytes were read since the last reset (the start of a
// document or of a List item). The JSON decoder reads ahead, so the bound is max plus its buffer.
type docLimitReader struct {
	r    io.Reader
	max  int64
	read int64
}

func (l *docLimitReader) reset() { l.read = 0 }

func (l *docLimitReader) Read(p []byte) (int, error) {
	if l.read > l.max {
		return 0, errDocTooLarge
	}
	n, err := l.r.Read(p)
	l.read += int64(n)
	return n, err
}

func jsonErrorText(err error) string {
	var te *json.UnmarshalTypeError
	if errors.As(err, &te) {
		return fmt.Sprintf("%s where an object was expected", te.Value)
	}
	return err.Error()
}

func (d *Document) fillHead() error {
	js := bytes.TrimSpace(d.JSON)
	if len(js) == 0 || js[0] != '{' {
		return notAnObject(d.Where(), d.JSON)
	}
	var head struct {
		APIVersion any `json:"apiVersion"`
		Kind       any `json:"kind"`
	}
	if err := json.Unmarshal(d.JSON, &head); err != nil {
		return inputErrorf("%s: not a Kubernetes object (want a mapping with apiVersion and kind): %v", d.Where(), jsonErrorText(err))
	}
	d.APIVersion, _ = head.APIVersion.(string)
	d.Kind, _ = head.Kind.(string)
	return nil
}

// stripComments drops whole-line YAML comments so that a document holding only comments counts
// as empty.
func stripComments(b []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(b, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			out = append(out, line...)
			out = append(out, '\n')
		}
	}
	return out
}

func trimYAMLError(err error) string {
	s := err.Error()
	s = strings.TrimPrefix(s, "error converting YAML to JSON: ")
	return s
}
