package convert

// writefile.go: one file of a write or check run, read as a stream of documents: a first read
// says whether it is a template or does not parse (each document parsed and let go); the
// second converts its objects a batch at a time, proves them, and writes the new file as it
// goes (to a temporary file beside it, put in place only once every object is proven) with the
// unified diff made a changed document at a time. Memory holds one batch of documents and
// their results; the file's results and diff go to spills (writespool.go) as each batch is
// done: memory is bounded by a batch of documents, never by the file.

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"slices"
	"strings"

	utiljson "k8s.io/apimachinery/pkg/util/json"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	"github.com/crdver/kubectl-crdver/internal/atomicfile"
)

// docReader reads a file's documents one at a time, each with its exact bytes: a document
// ends at a "---" line (its sep) or at the end of the file.
type docReader struct {
	r     *bufio.Reader
	line  int // lines read
	done  bool
	marks int // the "{{" read
}

func newDocReader(r io.Reader) *docReader { return &docReader{r: bufio.NewReaderSize(r, 64<<10)} }

// next is the next document, or io.EOF after the last.
func (r *docReader) next() (*document, error) {
	if r.done {
		return nil, io.EOF
	}
	d := &document{line: r.line + 1}
	var text []byte
	for {
		l, err := r.r.ReadBytes('\n')
		if len(l) > 0 {
			r.line++
			r.marks += bytes.Count(l, []byte("{{"))
			if isSeparator(l) {
				d.text, d.sep = text, l
				return d, nil
			}
			text = append(text, l...)
		}
		if err == io.EOF {
			r.done, d.text = true, text
			return d, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// scanManifest reads the file once to say why it is a template ("" when it is not) or why it
// does not parse, keeping none of it.
//
// A Go template (Helm's) is a file with some "{{" that is not inside a YAML string or a
// comment. A file that parses as YAML with every "{{" in a string value — a Cluster API
// ClusterClass's patch templates, an Argo Workflow's parameters — is data, and is converted
// like any other; a "{{" that YAML reads as structure (`name: {{ .Values.name }}` parses as a
// flow mapping) or that breaks the parse makes the file a template.
func scanManifest(ctx context.Context, path string) (template string, parseErr error, err error) {
	if t := templateReason(path); t != "" {
		return t, nil, nil
	}
	fh, err := os.Open(path)
	if err != nil {
		return "", nil, err
	}
	defer fh.Close()
	r := newDocReader(fh)
	inText := 0
	for {
		if err := ctx.Err(); err != nil {
			return "", nil, err
		}
		d, err := r.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return "", nil, err
		}
		text := string(d.text)
		if parseErr != nil || strings.TrimSpace(text) == "" {
			continue // past a parse error only the "{{" are counted
		}
		n, err := kyaml.Parse(text)
		if err != nil {
			if strings.Contains(err.Error(), "EOF") {
				inText += strings.Count(text, "{{") // comments only
				continue
			}
			parseErr = fmt.Errorf("%s:%d: %v", path, d.line, err)
			continue
		}
		inText += templateMarksInText(n.YNode())
	}
	if parseErr != nil && r.marks > 0 || parseErr == nil && inText < r.marks {
		return "Go template ({{ … }}, e.g. a Helm chart's templates/)", nil, nil
	}
	if k := kustomizationPatch(path); k != "" {
		return "a Kustomize patch (" + k + ")", nil, nil
	}
	return "", parseErr, nil
}

// file reads, converts, proves and (unless a dry run or a check) writes one file, and adds
// what happened to the report. Nothing of the file is kept afterwards but its result.
func (w *writer) file(ctx context.Context, path string) error {
	st, err := os.Stat(path)
	if err != nil {
		return err
	}
	template, parseErr, err := scanManifest(ctx, path)
	if err != nil {
		return err
	}
	if template != "" || parseErr != nil {
		return w.notData(ctx, path, template, parseErr)
	}
	f := &fileRun{w: w, path: path, mode: st.Mode().Perm(), res: FileResult{Path: path}, ok: true, spool: &fileSpool{}}
	if !w.check {
		f.diff = newDiffStream(path)
	}
	defer f.discard()
	return f.run(ctx)
}

// notData is the result of a template (the lines that name a CRD's group at another version)
// or of a file that does not parse (when it names a CRD's group). Such a file is read whole:
// templates are small.
func (w *writer) notData(ctx context.Context, path, template string, parseErr error) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	res := FileResult{Path: path}
	if template == "" {
		for _, t := range w.sortedTargets() {
			if bytes.Contains(data, []byte(t.Group+"/")) {
				res.Status, res.Reason = FileUnparsable, parseErr.Error()
				return w.add(ctx, res)
			}
		}
		return nil
	}
	res.Status, res.Reason = FileTemplate, template
	seen := map[string]bool{} // CRDs of one group name the same lines: each once
	for _, t := range w.sortedTargets() {
		for _, l := range oldVersionLines(data, t.Group, t.To) {
			if !seen[l] {
				seen[l] = true
				res.Lines = append(res.Lines, l)
			}
		}
	}
	if len(res.Lines) == 0 { // a template that does not name a CRD: nothing to say
		return nil
	}
	return w.add(ctx, res)
}

// fileRun is one data file on its way: its documents read, converted and written a batch at
// a time.
type fileRun struct {
	w    *writer
	path string
	mode fs.FileMode
	res  FileResult
	// objects, atTarget and todo count the file's objects of the CRDs, those at their target,
	// and those to convert (added to the report once the file is done).
	objects, atTarget, todo int
	parsed                  int
	ok, lossy               bool
	// batch are the documents read and not yet written, in order; pending how many of them
	// are objects to convert; results the results of those objects (document.result).
	batch   []*document
	pending int
	results []ObjectResult
	// spool has the results of the batches done, and (at the end) the diff.
	spool *fileSpool
	// out is the new file (made at the first converted document, with what came before it
	// copied from the file); offset is how much of the file has been written to it.
	out    *atomicfile.File
	offset int64
	diff   *diffStream
	// unparsable is the document whose object JSON cannot hold.
	unparsable error
}

// discard throws away what the file run holds on disk: the new file unless committed, the
// results and the diff (once the file's result was given to the report).
func (f *fileRun) discard() {
	if f.out != nil {
		f.out.Close()
	}
	f.spool.close()
	f.diff.discard()
}

func (f *fileRun) batchSize() int {
	if n := f.w.opts.BatchSize; n > 0 {
		return n
	}
	return DefaultBatchSize
}

// run reads the file's documents, converting each batch as it is full, and ends the file.
func (f *fileRun) run(ctx context.Context) error {
	fh, err := os.Open(f.path)
	if err != nil {
		return err
	}
	defer fh.Close()
	r := newDocReader(fh)
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		d, err := r.next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return err
		}
		if err := f.read(d); err != nil {
			return err
		}
		if f.unparsable != nil {
			return f.w.notData(ctx, f.path, "", f.unparsable)
		}
		// A batch is --batch-size documents: objects to convert, or others (a file of other
		// kinds, or of objects at their target, is not held whole either).
		if len(f.batch) >= f.batchSize() {
			if err := f.flush(ctx); err != nil {
				return err
			}
		}
	}
	if err := f.flush(ctx); err != nil {
		return err
	}
	return f.end(ctx)
}

// read parses a document and adds it to the batch: an object of a CRD below its target
// version is one to convert.
func (f *fileRun) read(d *document) error {
	f.batch = append(f.batch, d)
	text := string(d.text)
	if strings.TrimSpace(text) == "" {
		return nil
	}
	n, err := kyaml.Parse(text)
	if err != nil {
		return nil // comments only (scanManifest let nothing else through)
	}
	f.parsed++
	d.index, d.node = f.parsed, n
	if n.YNode().Kind != kyaml.MappingNode {
		return nil
	}
	js, err := n.MarshalJSON()
	if err != nil {
		f.unparsable = fmt.Errorf("%s:%d: %v", f.path, d.line, err)
		return nil
	}
	var m map[string]any
	if err := utiljson.Unmarshal(js, &m); err != nil {
		return nil
	}
	d.obj = m
	g, v, _ := strings.Cut(stringOf(m["apiVersion"]), "/")
	t := f.w.targets[g+"/"+stringOf(m["kind"])]
	if t == nil {
		return nil
	}
	f.objects++
	if v == t.To {
		f.atTarget++
		return nil
	}
	d.version, d.target = v, t
	d.source = fmt.Sprintf("%s:%d", f.path, d.line)
	f.todo++
	f.pending++
	served, known := t.served[v]
	state := VersionServed
	switch {
	case !known:
		state = VersionRemoved
	case !served:
		state = VersionNotServed
	}
	d.result = len(f.results)
	f.results = append(f.results, ObjectResult{Document: d.index, Line: d.line, Kind: t.Kind, Name: objectName(nestedString(m, "metadata", "namespace"), nestedString(m, "metadata", "name")), From: v, To: t.To, Served: state})
	return nil
}

// flush converts and proves the batch's objects (unless a check), and writes its documents to
// the new file and the diff.
func (f *fileRun) flush(ctx context.Context) error {
	if f.pending > 0 && !f.w.check {
		if err := f.prove(ctx); err != nil {
			return err
		}
	}
	for _, d := range f.batch {
		if err := f.emit(d); err != nil {
			return err
		}
	}
	clear(f.batch)
	f.batch, f.pending = f.batch[:0], 0
	// The batch's results are final: to the spool.
	if err := f.spool.addObjects(f.results); err != nil {
		return fmt.Errorf("keeping the results of %s: %w", f.path, err)
	}
	clear(f.results)
	f.results = f.results[:0]
	return nil
}

// prove converts the batch's objects, CRD by CRD, through each CRD's one conversion run, and
// proves each: no failed check, and valid on the API server's create path at its target.
func (f *fileRun) prove(ctx context.Context) error {
	w := f.w
	var todo []*document
	perTarget := map[*writeTarget][]Object{}
	var order []*writeTarget
	for _, d := range f.batch {
		if d.target == nil {
			continue
		}
		todo = append(todo, d)
		if f.results[d.result].Served == VersionRemoved {
			continue
		}
		t := d.target
		if _, seen := perTarget[t]; !seen {
			order = append(order, t)
		}
		perTarget[t] = append(perTarget[t], Object{Source: d.source, Object: d.obj})
	}
	findings, added := map[string][]Finding{}, map[string][]Change{}
	for _, t := range order {
		if err := w.convert(ctx, t, perTarget[t], findings, added); err != nil {
			return err
		}
	}
	defer func() {
		for _, t := range order {
			t.converted = nil
		}
	}()
	for _, d := range todo {
		if err := ctx.Err(); err != nil {
			return err
		}
		or := &f.results[d.result]
		t := d.target
		if or.Served == VersionRemoved {
			or.Problems = append(or.Problems, Finding{Object: d.source, Check: CheckAPIVersion, Detail: fmt.Sprintf("%s is not a version of %s: convert with the CRD of a release that still has it (--crd-file)", d.version, t.CRD), Severity: SeverityError})
		}
		or.Added = added[d.source]
		for _, fd := range findings[d.source] {
			if w.opts.AllowDataLoss && (fd.Check == CheckPruned || fd.Check == CheckRoundTrip) {
				or.Dropped = append(or.Dropped, fd)
				f.lossy = true
				continue
			}
			// A warning is what the API server does not fail on when it converts (a text/plain
			// answer): it does not stop the file. But for a file, the target schema's warning is
			// the rejection of the next apply: a problem, as the create path says too.
			if fd.Severity == SeverityWarning && fd.Check != CheckTargetSchema && !w.opts.Strict {
				// The same warning of the conversion and of its round trip: once.
				if !slices.ContainsFunc(or.Warnings, func(x Finding) bool { return x.Check == fd.Check && x.Path == fd.Path && x.Detail == fd.Detail }) {
					or.Warnings = append(or.Warnings, fd)
				}
				continue
			}
			or.Problems = append(or.Problems, fd)
		}
		c, done := t.converted[d.source]
		if !done && len(or.Problems) == 0 {
			detail := "not converted (the webhook failed the request, or it was not sent)"
			if t.run != nil && t.run.stop {
				detail = "not sent: the conversion webhook could not be reached"
			}
			or.Problems = append(or.Problems, Finding{Object: d.source, Check: CheckObjectJSON, Detail: detail, Severity: SeverityError})
		}
		if len(or.Problems) == 0 {
			// Valid in the target version: the API server's create path, at the cluster's
			// Kubernetes version, judges the document as it will be written.
			if err := rewriteDocument(d, c); err != nil {
				or.Problems = append(or.Problems, Finding{Object: d.source, Check: CheckObjectJSON, Detail: err.Error(), Severity: SeverityError})
			} else {
				or.DroppedComments = d.droppedComments
				if p := w.create(ctx, t, d); p != nil {
					or.Problems = append(or.Problems, *p)
				}
			}
		}
		if len(or.Problems) > 0 {
			f.ok = false
		}
	}
	return ctx.Err() // a check cut short is no finding: the file is left as it was
}

// emit writes a document of the batch (converted, or as it was) and its "---" line to the new
// file and the diff, once an object of the file has been converted; before that, nothing is
// copied: the new file starts with what came before it.
func (f *fileRun) emit(d *document) error {
	text := d.text
	if d.out != nil && f.ok {
		text = d.out
	}
	if f.diff != nil && f.ok {
		if d.out != nil {
			f.diff.changed(d.text, d.out)
		} else {
			f.diff.same(d.text)
		}
		f.diff.same(d.sep)
	}
	if d.out != nil && f.out == nil && f.ok && !f.w.opts.DryRun {
		if err := f.create(); err != nil {
			return err
		}
	}
	if f.out != nil && f.ok {
		if _, err := f.out.Write(text); err != nil {
			return err
		}
		if _, err := f.out.Write(d.sep); err != nil {
			return err
		}
	}
	f.offset += int64(len(d.text) + len(d.sep))
	return nil
}

// create starts the new file with the bytes of the file before the first converted document.
func (f *fileRun) create() error {
	out, err := atomicfile.Create(f.path, f.mode)
	if err != nil {
		return err
	}
	f.out = out
	in, err := os.Open(f.path)
	if err != nil {
		return err
	}
	defer in.Close()
	n, err := io.CopyN(out, in, f.offset)
	if err == nil && n != f.offset {
		err = errors.New("the file changed while it was read")
	}
	if err != nil {
		return fmt.Errorf("%s: %v", f.path, err)
	}
	return nil
}

// end puts the new file in place once every object is proven, and adds the file's result.
func (f *fileRun) end(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	rep, w := f.w.rep, f.w
	rep.Objects += f.objects
	rep.AtTarget += f.atTarget
	if f.todo == 0 {
		return nil
	}
	res := f.res
	res.spool = f.spool
	if w.check {
		res.Status = FileStillOld
		rep.Converted += f.todo
		return w.add(ctx, res)
	}
	if !f.ok {
		res.Status = FileNotProven
		return w.add(ctx, res)
	}
	diff, err := f.diff.finish()
	if err != nil {
		return fmt.Errorf("keeping the diff of %s: %w", f.path, err)
	}
	res.spool.diff = diff
	rep.Converted += f.todo
	switch {
	case w.opts.DryRun:
		res.Status = FileWouldWrite
	default:
		if f.out == nil {
			return fmt.Errorf("%s: no converted document to write", f.path)
		}
		if err := f.out.Commit(); err != nil {
			return err
		}
		res.Status = FileWritten
		if f.lossy {
			res.Status = FileWrittenLoss
		}
	}
	return w.add(ctx, res)
}
