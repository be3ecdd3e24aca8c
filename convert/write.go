package convert

// write.go: convert the objects of a CRD found in manifest files, and rewrite the files in
// place — only the documents that change, through kyaml (comments, key order and every other
// document kept byte for byte) — once every object of the file is proven: converted with no
// failed check, back to its own version with no difference, and valid in the target version.

import (
	"bytes"
	"context"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	"github.com/pmezard/go-difflib/difflib"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"
)

// File statuses of a write run.
const (
	FileWritten     = "written"                        // rewritten in place
	FileWouldWrite  = "would write"                    // --dry-run: the diff is in the report
	FileUnchanged   = "unchanged"                      // nothing of the CRD below the target version
	FileNotProven   = "not converted: not proven"      // an object failed; nothing in the file changed
	FileTemplate    = "not converted: a template"      // Helm, Kustomize patch, Jsonnet, CUE
	FileUnparsable  = "not converted: not YAML"        // a document kyaml cannot parse
	FileStillOld    = "still at an old version"        // --check: objects to convert
	FileWrittenLoss = "written with data loss allowed" // --allow-data-loss
)

// WriteOptions are the options of a write (or check) run.
type WriteOptions struct {
	// Options say how to convert (CRD, To, Transport, ReviewVersion, BatchSize); RoundTrip
	// is always on.
	Options
	// Files are the manifest files (directories are walked for .yaml, .yml and .json, and
	// report .jsonnet, .libsonnet and .cue files as templates).
	Files []string
	// DryRun computes the diff of each file and writes nothing.
	DryRun bool
	// AllowDataLoss writes objects whose only failures are data loss (pruned fields, round-
	// trip differences), listing what was dropped.
	AllowDataLoss bool
}

// WriteReport is the result of a write, dry run or check.
type WriteReport struct {
	CRD   string       `json:"crd"`
	To    string       `json:"to"`
	Mode  string       `json:"mode"` // write, dry-run or check
	Files []FileResult `json:"files"`
	// Objects counts the objects of the CRD found; Converted those converted (or to convert,
	// for check); AtTarget those already at the target version.
	Objects   int `json:"objects"`
	Converted int `json:"converted"`
	AtTarget  int `json:"atTarget"`
	// Conversion is the report of the conversion run (checks, findings, latency); nil for check.
	Conversion *Report `json:"conversion,omitempty"`
}

// FileResult is what happened to one file.
type FileResult struct {
	Path    string         `json:"path"`
	Status  string         `json:"status"`
	Objects []ObjectResult `json:"objects,omitempty"`
	// Lines name the CRD's group at a version other than the target, in a template.
	Lines []string `json:"lines,omitempty"`
	// Diff is the unified diff of the file (dry run, and what was written).
	Diff   string `json:"diff,omitempty"`
	Reason string `json:"reason,omitempty"`
}

// ObjectResult is one object of the CRD below the target version in a file.
type ObjectResult struct {
	Document int    `json:"document"` // 1-based
	Line     int    `json:"line"`     // of the document's first line
	Name     string `json:"name"`     // namespace/name
	From     string `json:"from"`
	// Problems are the failed checks that stop the file from being written; Dropped what
	// --allow-data-loss let go.
	Problems []Finding `json:"problems,omitempty"`
	Dropped  []Finding `json:"dropped,omitempty"`
}

// Problems is the number of files not converted (or, for check, still at an old version).
func (r *WriteReport) Problems() int {
	n := 0
	for _, f := range r.Files {
		switch f.Status {
		case FileNotProven, FileTemplate, FileUnparsable, FileStillOld:
			n++
		}
	}
	return n
}

// document is one YAML document of a file, with its exact byte range.
type document struct {
	start, end int // content, without its "---" separator line
	line       int
	node       *kyaml.RNode
	obj        map[string]any
	version    string // of the CRD below the target; "" when not to convert
	source     string
}

type manifestFile struct {
	path     string
	data     []byte
	mode     fs.FileMode
	docs     []*document
	template string // why it is a template
	parseErr error
}

// ExpandFiles lists the files of paths: files as given, directories walked (sorted).
func ExpandFiles(paths []string) ([]string, error) {
	var out []string
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, err
		}
		if !st.IsDir() {
			out = append(out, p)
			continue
		}
		err = filepath.WalkDir(p, func(path string, d fs.DirEntry, err error) error {
			if err != nil {
				return err
			}
			if d.IsDir() {
				return nil
			}
			switch strings.ToLower(filepath.Ext(path)) {
			case ".yaml", ".yml", ".json", ".jsonnet", ".libsonnet", ".cue":
				out = append(out, path)
			}
			return nil
		})
		if err != nil {
			return nil, err
		}
	}
	return out, nil
}

// Write converts the CRD's objects in opts.Files and rewrites the files that are proven.
func Write(ctx context.Context, opts WriteOptions) (*WriteReport, error) {
	return writeOrCheck(ctx, opts, false)
}

// Check lists the CRD's objects in opts.Files still at a version other than the target,
// converting nothing.
func Check(ctx context.Context, opts WriteOptions) (*WriteReport, error) {
	return writeOrCheck(ctx, opts, true)
}

func writeOrCheck(ctx context.Context, opts WriteOptions, check bool) (*WriteReport, error) {
	crd := opts.CRD
	if crd == nil {
		return nil, fmt.Errorf("no CustomResourceDefinition given")
	}
	rep := &WriteReport{CRD: crd.Name, To: opts.To, Mode: "write", Files: []FileResult{}}
	switch {
	case check:
		rep.Mode = "check"
	case opts.DryRun:
		rep.Mode = "dry-run"
	}
	paths, err := ExpandFiles(opts.Files)
	if err != nil {
		return nil, err
	}
	versions := map[string]bool{}
	for _, v := range crd.Spec.Versions {
		versions[v.Name] = true
	}
	if !versions[opts.To] {
		return nil, fmt.Errorf("%s has no version %q", crd.Name, opts.To)
	}
	var files []*manifestFile
	var objects []Object
	for _, p := range paths {
		f, err := readManifest(p)
		if err != nil {
			return nil, err
		}
		files = append(files, f)
		if f.template != "" || f.parseErr != nil {
			continue
		}
		for _, d := range f.docs {
			if d.obj == nil {
				continue
			}
			g, v, _ := strings.Cut(stringOf(d.obj["apiVersion"]), "/")
			if g != crd.Spec.Group || stringOf(d.obj["kind"]) != crd.Spec.Names.Kind {
				continue
			}
			rep.Objects++
			if v == opts.To {
				rep.AtTarget++
				continue
			}
			d.version = v
			d.source = fmt.Sprintf("%s:%d", p, d.line)
			if !versions[v] && !check {
				continue // reported below as not proven
			}
			objects = append(objects, Object{Source: d.source, Object: d.obj})
		}
	}

	converted := map[string][2]map[string]any{}
	findings := map[string][]Finding{}
	if !check && len(objects) > 0 {
		o := opts.Options
		o.RoundTrip = true
		o.Converted = func(source string, sent, conv map[string]any) {
			converted[source] = [2]map[string]any{sent, conv}
		}
		conv, err := RunSource(ctx, o, SliceSource(objects))
		if err != nil {
			return nil, err
		}
		rep.Conversion = conv
		for _, f := range conv.Findings {
			findings[f.Object] = append(findings[f.Object], f)
		}
	}

	for _, f := range files {
		res := FileResult{Path: f.path}
		switch {
		case f.template != "":
			res.Status, res.Reason = FileTemplate, f.template
			res.Lines = oldVersionLines(f.data, crd.Spec.Group, opts.To)
			if len(res.Lines) == 0 {
				continue // a template that does not name the CRD: nothing to say
			}
			rep.Files = append(rep.Files, res)
			continue
		case f.parseErr != nil:
			if !bytes.Contains(f.data, []byte(crd.Spec.Group+"/")) {
				continue
			}
			res.Status, res.Reason = FileUnparsable, f.parseErr.Error()
			rep.Files = append(rep.Files, res)
			continue
		}
		var todo []*document
		for i, d := range f.docs {
			if d.version == "" {
				continue
			}
			todo = append(todo, d)
			res.Objects = append(res.Objects, ObjectResult{Document: i + 1, Line: d.line, Name: objectName(nestedString(d.obj, "metadata", "namespace"), nestedString(d.obj, "metadata", "name")), From: d.version})
		}
		if len(todo) == 0 {
			continue
		}
		if check {
			res.Status = FileStillOld
			rep.Converted += len(todo)
			rep.Files = append(rep.Files, res)
			continue
		}
		ok, lossy := true, false
		for i, d := range todo {
			or := &res.Objects[i]
			if !versions[d.version] {
				or.Problems = append(or.Problems, Finding{Object: d.source, Check: CheckAPIVersion, Detail: fmt.Sprintf("%s is not a version of %s", d.version, crd.Name), Severity: SeverityError})
			}
			for _, fd := range findings[d.source] {
				if opts.AllowDataLoss && (fd.Check == CheckPruned || fd.Check == CheckRoundTrip) {
					or.Dropped = append(or.Dropped, fd)
					lossy = true
					continue
				}
				or.Problems = append(or.Problems, fd)
			}
			if _, done := converted[d.source]; !done && len(or.Problems) == 0 {
				or.Problems = append(or.Problems, Finding{Object: d.source, Check: CheckObjectJSON, Detail: "not converted (the webhook failed the request, or it was not sent)", Severity: SeverityError})
			}
			if len(or.Problems) > 0 {
				ok = false
			}
		}
		if !ok {
			res.Status = FileNotProven
			rep.Files = append(rep.Files, res)
			continue
		}
		out, err := rewrite(f, converted)
		if err != nil {
			res.Status, res.Reason = FileNotProven, err.Error()
			rep.Files = append(rep.Files, res)
			continue
		}
		res.Diff = unifiedDiff(f.path, f.data, out)
		rep.Converted += len(todo)
		switch {
		case opts.DryRun:
			res.Status = FileWouldWrite
		default:
			if err := writeAtomic(f.path, out, f.mode); err != nil {
				return rep, err
			}
			res.Status = FileWritten
			if lossy {
				res.Status = FileWrittenLoss
			}
		}
		rep.Files = append(rep.Files, res)
	}
	return rep, nil
}

func stringOf(v any) string { s, _ := v.(string); return s }

// readManifest reads a file and splits it into documents with their byte ranges; a template
// is recognised and not parsed.
func readManifest(path string) (*manifestFile, error) {
	st, err := os.Stat(path)
	if err != nil {
		return nil, err
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	f := &manifestFile{path: path, data: data, mode: st.Mode().Perm()}
	if f.template = templateReason(path, data); f.template != "" {
		return f, nil
	}
	for _, d := range splitDocuments(data) {
		text := string(data[d.start:d.end])
		if strings.TrimSpace(text) == "" {
			continue
		}
		n, err := kyaml.Parse(text)
		if err != nil {
			if strings.Contains(err.Error(), "EOF") {
				continue // comments only
			}
			f.parseErr = fmt.Errorf("%s:%d: %v", path, d.line, err)
			return f, nil
		}
		d.node = n
		if n.YNode().Kind == kyaml.MappingNode {
			js, err := n.MarshalJSON()
			if err != nil {
				f.parseErr = fmt.Errorf("%s:%d: %v", path, d.line, err)
				return f, nil
			}
			var m map[string]any
			if err := utiljson.Unmarshal(js, &m); err == nil {
				d.obj = m
			}
		}
		f.docs = append(f.docs, d)
	}
	return f, nil
}

// splitDocuments splits YAML text at its "---" lines, keeping each document's exact bytes.
func splitDocuments(data []byte) []*document {
	var out []*document
	start, line := 0, 1
	pos, n := 0, 1
	for pos < len(data) {
		end := bytes.IndexByte(data[pos:], '\n')
		next := len(data)
		if end >= 0 {
			next = pos + end + 1
		}
		l := data[pos:next]
		if isSeparator(l) {
			out = append(out, &document{start: start, end: pos, line: line})
			start, line = next, n+1
		}
		pos = next
		n++
	}
	out = append(out, &document{start: start, end: len(data), line: line})
	return out
}

func isSeparator(l []byte) bool {
	l = bytes.TrimRight(l, "\r\n")
	if !bytes.HasPrefix(l, []byte("---")) {
		return false
	}
	rest := l[3:]
	return len(rest) == 0 || rest[0] == ' ' || rest[0] == '\t'
}

// templateReason says why a file is a template, or "".
func templateReason(path string, data []byte) string {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".jsonnet", ".libsonnet":
		return "Jsonnet"
	case ".cue":
		return "CUE"
	}
	if bytes.Contains(data, []byte("{{")) {
		return "Go template ({{ … }}, e.g. a Helm chart's templates/)"
	}
	if k := kustomizationPatch(path); k != "" {
		return "a Kustomize patch (" + k + ")"
	}
	return ""
}

// kustomizationPatch names the kustomization file in path's directory that uses path as a
// patch, or "".
func kustomizationPatch(path string) string {
	dir, base := filepath.Split(path)
	for _, name := range []string{"kustomization.yaml", "kustomization.yml", "Kustomization"} {
		k := filepath.Join(dir, name)
		data, err := os.ReadFile(k)
		if err != nil {
			continue
		}
		n, err := kyaml.Parse(string(data))
		if err != nil {
			continue
		}
		var m map[string]any
		if js, err := n.MarshalJSON(); err != nil || utiljson.Unmarshal(js, &m) != nil {
			continue
		}
		var refs []string
		for _, key := range []string{"patchesStrategicMerge", "patches", "patchesJson6902"} {
			list, _ := m[key].([]any)
			for _, e := range list {
				switch e := e.(type) {
				case string:
					refs = append(refs, e)
				case map[string]any:
					refs = append(refs, stringOf(e["path"]))
				}
			}
		}
		for _, r := range refs {
			if filepath.Clean(r) == base {
				return k
			}
		}
	}
	return ""
}

// oldVersionLines are the lines that name group at a version other than to.
func oldVersionLines(data []byte, group, to string) []string {
	var out []string
	for i, l := range strings.Split(string(data), "\n") {
		idx := strings.Index(l, group+"/")
		if idx < 0 {
			continue
		}
		rest := l[idx+len(group)+1:]
		if strings.HasPrefix(rest, to) && (len(rest) == len(to) || !isVersionChar(rest[len(to)])) {
			continue
		}
		out = append(out, fmt.Sprintf("%d: %s", i+1, strings.TrimSpace(l)))
	}
	return out
}

func isVersionChar(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

// rewrite returns the file with each converted document replaced; every other byte is kept.
func rewrite(f *manifestFile, converted map[string][2]map[string]any) ([]byte, error) {
	var out bytes.Buffer
	pos := 0
	for _, d := range f.docs {
		if d.version == "" {
			continue
		}
		c := converted[d.source]
		orig := string(f.data[d.start:d.end])
		removed := map[string]bool{}
		if err := applyChange(d.node, c[0], c[1], removed); err != nil {
			return nil, fmt.Errorf("%s: %v", d.source, err)
		}
		style := kyaml.SequenceIndentStyle(kyaml.DeriveSeqIndentStyle(orig))
		b, err := kyaml.MarshalWithOptions(d.node.Document(), &kyaml.EncoderOptions{SeqIndent: style})
		if err != nil {
			return nil, fmt.Errorf("%s: %v", d.source, err)
		}
		// What is written must read back as the converted object, and keep every comment.
		if err := verifyDocument(d.source, orig, b, c[0], c[1], d.obj, removed); err != nil {
			return nil, err
		}
		out.Write(f.data[pos:d.start])
		out.Write(b)
		pos = d.end
	}
	out.Write(f.data[pos:])
	return out.Bytes(), nil
}

// verifyDocument checks the re-serialised document: every comment line of the original is
// still there (but those of the fields the conversion removed), and it parses to the file's
// object with the conversion's changes applied.
func verifyDocument(source, orig string, got []byte, sent, conv, fileObj map[string]any, removed map[string]bool) error {
	for _, l := range strings.Split(orig, "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "#") && !removed[t] && !bytes.Contains(got, []byte(t)) {
			return fmt.Errorf("%s: the comment %q would be lost", source, t)
		}
	}
	n, err := kyaml.Parse(string(got))
	if err != nil {
		return fmt.Errorf("%s: the rewritten document does not parse: %v", source, err)
	}
	js, err := n.MarshalJSON()
	if err != nil {
		return err
	}
	var m map[string]any
	if err := utiljson.Unmarshal(js, &m); err != nil {
		return err
	}
	want, _ := applyMap(fileObj, sent, conv).(map[string]any)
	if d := Diff(want, m); len(d) > 0 {
		return fmt.Errorf("%s: the rewritten document differs from the conversion at %s: %s", source, d[0].Path, d[0].Detail)
	}
	return nil
}

// applyMap applies the change base -> want to file (a three-way merge on values): what the
// conversion changed is changed, what it added is added, what it removed is removed, and
// what the file leaves out (defaults the API server fills in) stays left out.
func applyMap(file, base, want any) any {
	if reflect.DeepEqual(base, want) {
		return file
	}
	fm, fok := file.(map[string]any)
	bm, bok := base.(map[string]any)
	wm, wok := want.(map[string]any)
	if !fok || !bok || !wok {
		fl, fok := file.([]any)
		bl, bok := base.([]any)
		wl, wok := want.([]any)
		if fok && bok && wok && len(fl) == len(bl) && len(bl) == len(wl) {
			out := make([]any, len(fl))
			for i := range fl {
				out[i] = applyMap(fl[i], bl[i], wl[i])
			}
			return out
		}
		return want
	}
	out := map[string]any{}
	for k, v := range fm {
		out[k] = v
	}
	for k, wv := range wm {
		bv, inBase := bm[k]
		fv, inFile := fm[k]
		switch {
		case !inBase:
			out[k] = wv
		case !inFile:
			if !reflect.DeepEqual(bv, wv) {
				out[k] = wv
			}
		default:
			out[k] = applyMap(fv, bv, wv)
		}
	}
	for k := range bm {
		if _, ok := wm[k]; !ok {
			delete(out, k)
		}
	}
	return out
}

// applyChange applies the change base -> want to the node, as applyMap does to values,
// replacing only the nodes whose value changes and keeping their comments.
func applyChange(node *kyaml.RNode, base, want any, removed map[string]bool) error {
	if reflect.DeepEqual(base, want) {
		return nil
	}
	bm, bok := base.(map[string]any)
	wm, wok := want.(map[string]any)
	if bok && wok && node.YNode().Kind == kyaml.MappingNode {
		keys := make([]string, 0, len(wm))
		for k := range wm {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			wv := wm[k]
			bv, inBase := bm[k]
			field := node.Field(k)
			switch {
			case field == nil:
				if inBase && reflect.DeepEqual(bv, wv) {
					continue // a default the file leaves out
				}
				v, err := valueNode(wv)
				if err != nil {
					return err
				}
				if err := node.PipeE(kyaml.SetField(k, v)); err != nil {
					return err
				}
			case !inBase:
				if err := replaceNode(field.Value, wv); err != nil {
					return err
				}
			default:
				if err := applyChange(field.Value, bv, wv, removed); err != nil {
					return err
				}
			}
		}
		for k := range bm {
			if _, ok := wm[k]; !ok {
				if f := node.Field(k); f != nil {
					commentsOf(f.Key.YNode(), removed)
					commentsOf(f.Value.YNode(), removed)
				}
				if _, err := node.Pipe(kyaml.Clear(k)); err != nil {
					return err
				}
			}
		}
		return nil
	}
	bl, bok := base.([]any)
	wl, wok := want.([]any)
	if bok && wok && len(bl) == len(wl) && node.YNode().Kind == kyaml.SequenceNode && len(node.YNode().Content) == len(wl) {
		for i := range wl {
			if err := applyChange(kyaml.NewRNode(node.YNode().Content[i]), bl[i], wl[i], removed); err != nil {
				return err
			}
		}
		return nil
	}
	return replaceNode(node, want)
}

// commentsOf adds the comment lines of n and its children to set: they go with a removed field.
func commentsOf(n *kyaml.Node, set map[string]bool) {
	for _, c := range []string{n.HeadComment, n.LineComment, n.FootComment} {
		for _, l := range strings.Split(c, "\n") {
			if l = strings.TrimSpace(l); l != "" {
				set[l] = true
			}
		}
	}
	for _, c := range n.Content {
		commentsOf(c, set)
	}
}

// valueNode encodes a JSON value as a YAML node.
func valueNode(v any) (*kyaml.RNode, error) {
	js, err := utiljson.Marshal(v)
	if err != nil {
		return nil, err
	}
	n, err := kyaml.Parse(string(js)) // JSON is YAML (in flow style: cleared below)
	if err != nil {
		return nil, err
	}
	clearStyle(n.YNode())
	return n, nil
}

// clearStyle drops the flow (JSON) style the conversion from JSON gives, for block YAML.
func clearStyle(n *kyaml.Node) {
	if n.Kind != kyaml.ScalarNode {
		n.Style = 0
	} else if n.Style == kyaml.DoubleQuotedStyle && n.Tag == kyaml.NodeTagString && !needsQuotes(n.Value) {
		n.Style = 0
	}
	for _, c := range n.Content {
		clearStyle(c)
	}
}

// needsQuotes says whether a string would read back as something else unquoted.
func needsQuotes(s string) bool {
	n, err := kyaml.Parse(s)
	if err != nil {
		return true
	}
	y := n.YNode()
	return y.Kind != kyaml.ScalarNode || y.Tag != kyaml.NodeTagString || y.Value != s || strings.ContainsAny(s, "\n#:")
}

// replaceNode gives node the value v, keeping its comments (and a scalar's quoting when
// the type stays the same).
func replaceNode(node *kyaml.RNode, v any) error {
	n, err := valueNode(v)
	if err != nil {
		return err
	}
	old := node.YNode()
	nn := n.YNode()
	if old.Kind == kyaml.ScalarNode && nn.Kind == kyaml.ScalarNode && old.Tag == nn.Tag {
		old.Value = nn.Value
		return nil
	}
	head, line, foot := old.HeadComment, old.LineComment, old.FootComment
	*old = *nn
	old.HeadComment, old.LineComment, old.FootComment = head, line, foot
	return nil
}

func unifiedDiff(path string, a, b []byte) string {
	d, _ := difflib.GetUnifiedDiffString(difflib.UnifiedDiff{
		A: difflib.SplitLines(string(a)), B: difflib.SplitLines(string(b)),
		FromFile: "a/" + filepath.ToSlash(path), ToFile: "b/" + filepath.ToSlash(path), Context: 3,
	})
	return d
}

// writeAtomic replaces path by data: a temporary file in the same directory, renamed over it,
// with the file's mode.
func writeAtomic(path string, data []byte, mode fs.FileMode) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".crdver-*")
	if err != nil {
		return err
	}
	name := tmp.Name()
	defer os.Remove(name)
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(mode); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(name, path)
}
