package printers

// stream.go: a report whose one long list is written as its items come (-o json|yaml of a
// streamed run): the list first, then the rest of the report once it is known.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"

	"sigs.k8s.io/yaml"
)

// listStream writes, as JSON, `{"<key>": [item, …], <the rest of the report>}`, or, as YAML,
// `<key>:` with one `- item` per item and then the rest: the items as they are given, the rest
// (the report's other fields, in their order) at Finish. The JSON is indented as Data's, and
// is the report Data would print with its fields in another order.
type listStream struct {
	w     io.Writer
	yaml  bool
	key   string
	items int
}

// Item writes one item of the list.
func (s *listStream) Item(v any) error {
	var b bytes.Buffer
	if s.yaml {
		if s.items == 0 {
			fmt.Fprintf(&b, "%s:\n", s.key)
		}
		if yw, ok := v.(yamlWriter); ok { // written as it is read: a large item is not held
			s.items++
			if _, err := s.w.Write(b.Bytes()); err != nil {
				return err
			}
			iw := &yamlItemWriter{w: s.w}
			return yw.WriteYAML(iw)
		}
		if err := writeYAMLItem(&b, v); err != nil {
			return err
		}
	} else {
		if s.items == 0 {
			fmt.Fprintf(&b, "{\n  %q: [\n    ", s.key)
		} else {
			b.WriteString(",\n    ")
		}
		if jw, ok := v.(jsonWriter); ok { // written as it is read: a large item is not held
			s.items++
			if _, err := s.w.Write(b.Bytes()); err != nil {
				return err
			}
			return jw.WriteJSON(s.w, "    ", "  ")
		}
		js, err := json.MarshalIndent(v, "    ", "  ")
		if err != nil {
			return err
		}
		b.Write(js)
	}
	s.items++
	_, err := s.w.Write(b.Bytes())
	return err
}

// jsonWriter is an item that writes itself as json.MarshalIndent would, a piece at a time
// (convert.FileResult).
type jsonWriter interface {
	WriteJSON(w io.Writer, prefix, indent string) error
}

// yamlWriter is an item that writes itself as sigs.k8s.io/yaml.Marshal would, a piece at a
// time (convert.FileResult).
type yamlWriter interface {
	WriteYAML(w io.Writer) error
}

// yamlItemWriter writes the YAML written to it as one item of a YAML list, a line at a time:
// "- " before the first line, the others indented unless empty (blank lines of block scalars
// left blank).
type yamlItemWriter struct {
	w       io.Writer
	started bool // a line was begun
	mid     bool // in the middle of a line
}

func (iw *yamlItemWriter) Write(p []byte) (int, error) {
	var b bytes.Buffer
	for rest := p; len(rest) > 0; {
		if !iw.mid {
			switch {
			case !iw.started:
				b.WriteString("- ")
			case rest[0] != '\n':
				b.WriteString("  ")
			}
			iw.started = true
		}
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line = rest[:i+1]
		}
		b.Write(line)
		iw.mid = line[len(line)-1] != '\n'
		rest = rest[len(line):]
	}
	if _, err := iw.w.Write(b.Bytes()); err != nil {
		return 0, err
	}
	return len(p), nil
}

// writeYAMLItem writes v as one item of a YAML list (yamlItemWriter).
func writeYAMLItem(b *bytes.Buffer, v any) error {
	y, err := yaml.Marshal(v)
	if err != nil {
		return err
	}
	_, err = (&yamlItemWriter{w: b}).Write(y)
	return err
}

// Finish writes the rest of report: every field but the list's (which must be empty in it: its
// items were given to Item).
func (s *listStream) Finish(report any) error {
	js, err := json.MarshalIndent(report, "", "  ")
	if err != nil {
		return err
	}
	rest, err := withoutField(js, s.key)
	if err != nil {
		return err
	}
	var b bytes.Buffer
	if s.yaml {
		if s.items == 0 {
			fmt.Fprintf(&b, "%s: []\n", s.key)
		}
		y, err := yaml.JSONToYAML(rest)
		if err != nil {
			return err
		}
		if string(y) != "{}\n" {
			b.Write(y)
		}
		_, err = s.w.Write(b.Bytes())
		return err
	}
	if s.items == 0 {
		fmt.Fprintf(&b, "{\n  %q: []", s.key)
	} else {
		b.WriteString("\n  ]")
	}
	body := bytes.TrimSuffix(bytes.TrimPrefix(rest, []byte("{")), []byte("}"))
	if len(bytes.TrimSpace(body)) > 0 {
		b.WriteByte(',')
		b.Write(body)
	} else {
		b.WriteByte('\n')
	}
	b.WriteString("}\n")
	_, err = s.w.Write(b.Bytes())
	return err
}

// withoutField is the indented JSON object js without its top-level field key (whose value,
// null or empty, is on the key's line).
func withoutField(js []byte, key string) ([]byte, error) {
	lines := bytes.Split(js, []byte("\n"))
	prefix := []byte(fmt.Sprintf("  %q: ", key))
	for i, l := range lines {
		if !bytes.HasPrefix(l, prefix) {
			continue
		}
		v := bytes.TrimSuffix(bytes.TrimPrefix(l, prefix), []byte(","))
		if s := string(v); s != "null" && s != "[]" && s != "{}" {
			return nil, fmt.Errorf("printing the report: its %s are printed as they come and must not be in it", key)
		}
		last := !bytes.HasSuffix(l, []byte(","))
		lines = append(lines[:i], lines[i+1:]...)
		if last && i > 1 {
			lines[i-1] = bytes.TrimSuffix(lines[i-1], []byte(","))
		}
		return bytes.Join(lines, []byte("\n")), nil
	}
	return js, nil
}
