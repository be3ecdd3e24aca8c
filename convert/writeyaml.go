package convert

// writeyaml.go: a file's result as YAML (-o yaml of a write or check run), written as its
// objects and its diff are read back from their spills: memory holds one object's result and a
// buffer of the diff, never the file's. The bytes are those of sigs.k8s.io/yaml.Marshal(f)
// (JSON, then YAML with the keys sorted): each top-level field and each object is marshalled
// alone at the column it has in the whole, and the diff — one string, as long as the file —
// is written as the YAML emitter (go.yaml.in/yaml/v2) writes a string with line breaks: a
// literal block ("|") when it can hold it, else a double-quoted string folded past column 80.

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"
	"unicode/utf8"

	sigsyaml "sigs.k8s.io/yaml"
)

// WriteYAML writes f as sigs.k8s.io/yaml.Marshal(f) does, its objects and its diff written as
// they are read: memory holds one object.
func (f FileResult) WriteYAML(w io.Writer) error {
	if f.spool == nil {
		y, err := sigsyaml.Marshal(f)
		if err == nil {
			_, err = w.Write(y)
		}
		return err
	}
	bw := bufio.NewWriterSize(w, 64<<10)
	field := func(key string, v any) error {
		y, err := sigsyaml.Marshal(map[string]any{key: v})
		if err == nil {
			_, err = bw.Write(y)
		}
		return err
	}
	// The keys in the order the emitter sorts them.
	if f.HasDiff() {
		if err := f.writeYAMLDiff(bw); err != nil {
			return err
		}
	}
	if len(f.Lines) > 0 {
		if err := field("lines", f.Lines); err != nil {
			return err
		}
	}
	if f.Len() > 0 {
		bw.WriteString("objects:\n")
		err := f.EachObject(func(o ObjectResult) error {
			y, err := sigsyaml.Marshal(map[string]any{"objects": []ObjectResult{o}})
			if err != nil {
				return err
			}
			_, err = bw.Write(bytes.TrimPrefix(y, []byte("objects:\n")))
			return err
		})
		if err != nil {
			return err
		}
	}
	if err := field("path", f.Path); err != nil {
		return err
	}
	if f.Reason != "" {
		if err := field("reason", f.Reason); err != nil {
			return err
		}
	}
	if err := field("status", f.Status); err != nil {
		return err
	}
	return bw.Flush()
}

// writeYAMLDiff writes the field diff, read back from its spill (twice: once to choose how
// the emitter would write it, once to write it).
func (f FileResult) writeYAMLDiff(w *bufio.Writer) error {
	open := func() (io.Reader, error) {
		if f.spool == nil || f.spool.diff == nil {
			return strings.NewReader(f.Diff), nil
		}
		if err := f.spool.diff.err; err != nil {
			return nil, err
		}
		return f.spool.diff.reader(), nil
	}
	return writeYAMLText(w, "diff", open)
}

// yamlText is what the emitter's analysis of a string (yaml_emitter_analyze_scalar) says
// about it, for a string with a line break.
type yamlText struct {
	newline bool // a "\n": the emitter is asked for a literal block
	// blockless: the emitter cannot write it as a block (a non-printable character, a space
	// before a line break, or a space at the end): it writes it double-quoted.
	blockless  bool
	bom        bool // starts with a byte order mark (the emitter then escapes every character)
	otherBreak bool // a line break other than "\n" (U+2028, U+2029: printable)
	// nel: a U+0085, which sigs.k8s.io/yaml's reading of the JSON (where it is not escaped)
	// folds with the spaces around it.
	nel        bool
	indentHint bool // starts with a space or a line break: "|2"
	chomp      string
}

// streamed says whether writeYAMLText writes the text as the emitter does; it marshals the
// others whole (a text without a line break, a byte order mark first, a U+0085, and in a
// block a line break other than "\n" or trailing line breaks kept, "|+": none is a diff's
// but the rare one with U+0085, U+2028 or U+2029 in it).
func (t yamlText) streamed() bool {
	return t.newline && !t.bom && !t.nel && (t.blockless || !t.otherBreak && t.chomp != "+")
}

// yamlPrintable is the emitter's is_printable, for a rune.
func yamlPrintable(r rune) bool {
	return r == '\n' || r >= 0x20 && r <= 0x7E || r >= 0xA0 && r <= 0xD7FF || r >= 0xE000 && r <= 0xFFFD && r != 0xFEFF
}

// yamlBreak is the emitter's is_break, for a rune.
func yamlBreak(r rune) bool {
	return r == '\r' || r == '\n' || r == 0x85 || r == 0x2028 || r == 0x2029
}

// analyzeYAMLText reads the text r reads as json.Marshal has it (each invalid byte a U+FFFD).
func analyzeYAMLText(r io.Reader) (yamlText, error) {
	var t yamlText
	br := bufio.NewReaderSize(r, 64<<10)
	var prev, last rune = -1, -1 // the two runes before the one at hand
	first := true
	for {
		c, _, err := br.ReadRune()
		if err == io.EOF {
			break
		}
		if err != nil {
			return t, err
		}
		if first {
			t.indentHint = c == ' ' || yamlBreak(c)
			t.bom = c == 0xFEFF
			first = false
		}
		switch {
		case !yamlPrintable(c):
			t.blockless = true
		case c == '\n':
			t.newline = true
		case yamlBreak(c):
			t.otherBreak = true
		}
		t.nel = t.nel || c == 0x85
		if yamlBreak(c) && last == ' ' {
			t.blockless = true
		}
		prev, last = last, c
	}
	switch {
	case last == ' ':
		t.blockless = true
	case last < 0 || !yamlBreak(last):
		t.chomp = "-"
	case prev < 0 || yamlBreak(prev):
		t.chomp = "+"
	}
	return t, nil
}

// writeYAMLText writes `key: text` (a top-level field) as sigs.k8s.io/yaml.Marshal writes it,
// the text read from open, a buffer at a time.
func writeYAMLText(w *bufio.Writer, key string, open func() (io.Reader, error)) error {
	r, err := open()
	if err != nil {
		return err
	}
	t, err := analyzeYAMLText(r)
	if err != nil {
		return err
	}
	if r, err = open(); err != nil {
		return err
	}
	if !t.streamed() {
		var b strings.Builder
		if _, err := io.Copy(&b, r); err != nil {
			return err
		}
		y, err := sigsyaml.Marshal(map[string]string{key: b.String()})
		if err == nil {
			_, err = w.Write(y)
		}
		return err
	}
	br := bufio.NewReaderSize(r, 64<<10)
	if t.blockless {
		return writeYAMLDoubleQuoted(w, key, br)
	}
	// A literal block: each line indented, empty lines left empty.
	hint := t.chomp
	if t.indentHint {
		hint = "2" + hint
	}
	w.WriteString(key + ": |" + hint + "\n")
	bol := true
	for {
		c, _, err := br.ReadRune()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if c == '\n' {
			w.WriteByte('\n')
			bol = true
			continue
		}
		if bol {
			w.WriteString("  ")
			bol = false
		}
		w.WriteRune(c)
	}
	if !bol {
		w.WriteByte('\n')
	}
	return nil
}

// yamlWidth is the column past which the emitter folds a double-quoted string at a space.
const yamlWidth = 80

// writeYAMLDoubleQuoted writes `key: "text"` as the emitter does
// (yaml_emitter_write_double_quoted_scalar): escapes for what is not printable, line breaks,
// quotes and backslashes; folded at a space once past column 80, the next line indented by
// two (a "\" before a space that starts it).
func writeYAMLDoubleQuoted(w *bufio.Writer, key string, br *bufio.Reader) error {
	w.WriteString(key + `: "`)
	column := utf8.RuneCountInString(key) + 3
	spaces, first := false, true
	c, _, err := br.ReadRune()
	for err == nil {
		next, _, nerr := br.ReadRune()
		if nerr != nil && nerr != io.EOF {
			return nerr
		}
		more := nerr == nil
		switch {
		case !yamlPrintable(c) || yamlBreak(c) || c == '"' || c == '\\':
			e := yamlEscape(c)
			w.WriteString(e)
			column += len(e)
			spaces = false
		case c == ' ':
			if !spaces && column > yamlWidth && !first && more {
				w.WriteString("\n  ")
				column = 2
				if next == ' ' {
					w.WriteByte('\\')
					column++
				}
			} else {
				w.WriteByte(' ')
				column++
			}
			spaces = true
		default:
			w.WriteRune(c)
			column++
			spaces = false
		}
		first = false
		c, err = next, nerr
	}
	if err != io.EOF {
		return err
	}
	_, err = w.WriteString("\"\n")
	return err
}

// yamlShortEscapes are the escapes of one letter.
var yamlShortEscapes = map[rune]string{0: `\0`, 7: `\a`, 8: `\b`, 9: `\t`, 0xA: `\n`, 0xB: `\v`, 0xC: `\f`, 0xD: `\r`, 0x1B: `\e`, '"': `\"`, '\\': `\\`, 0x85: `\N`, 0xA0: `\_`, 0x2028: `\L`, 0x2029: `\P`}

// yamlEscape is the emitter's escape of c in a double-quoted string.
func yamlEscape(c rune) string {
	if s, ok := yamlShortEscapes[c]; ok {
		return s
	}
	switch {
	case c <= 0xFF:
		return fmt.Sprintf(`\x%02X`, c)
	case c <= 0xFFFF:
		return fmt.Sprintf(`\u%04X`, c)
	}
	return fmt.Sprintf(`\U%08X`, c)
}
