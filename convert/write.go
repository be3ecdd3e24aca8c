package convert

// write.go: convert the objects of a CRD found in manifest files, and rewrite the files in
// place — only the documents that change, through kyaml (comments, key order and every other
// document kept byte for byte) — once every object of the file is proven: converted with no
// failed check, back to its own version with no difference, and valid in the target version.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	kyaml "sigs.k8s.io/kustomize/kyaml/yaml"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/kubeversion"
	"github.com/crdver/kubectl-crdver/preview"
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
	// CRDs are the CRDs of a release: the objects of every one of them are converted in the
	// same run, each to To when it is set (every CRD must have that version), else to its own
	// storage version. Options.CRD is then unused, and TransportFor reaches the webhook of
	// each CRD whose conversion is Webhook.
	CRDs         []*apiextensionsv1.CustomResourceDefinition
	TransportFor func(*apiextensionsv1.CustomResourceDefinition) (Transport, error)
	// Files are the manifest files (directories are walked for .yaml, .yml and .json, and
	// report .jsonnet, .libsonnet and .cue files as templates). They are read, converted and
	// written one at a time, each a batch of documents at a time: memory is bounded by a batch.
	Files []string
	// File, when set, gets each file's result as soon as the file is done, in the order of
	// Files, with the report so far (its counts, and what it says of the run); the report's
	// Files then stay empty. The result's objects and diff are read back from a spill
	// (FileResult.EachObject, WriteDiff, WriteJSON; Loaded to keep them) while File runs,
	// so that memory holds a batch of documents whatever the size or number of files. Its
	// error stops the run.
	File func(*WriteReport, FileResult) error
	// DryRun computes the diff of each file and writes nothing.
	DryRun bool
	// AllowDataLoss writes objects whose only failures are data loss (pruned fields, round-
	// trip differences), listing what was dropped.
	AllowDataLoss bool
	// Strict makes warnings (what the API server does not fail on, such as a text/plain
	// Content-Type) stop a file from being written too; without it they are listed and the
	// file is written.
	Strict bool
	// KubeVersion is the Kubernetes version whose create path (package preview: decoding,
	// pruning, defaulting, OpenAPI and CEL validation) judges every converted object before
	// its file is written: the process must run as it (kubeversion.Use, chosen once per run by
	// the caller; Write refuses another). Zero: the version the process runs as.
	KubeVersion kubeversion.Version
	// FieldValidation is that create's directive ("": Strict, kubectl apply's default).
	FieldValidation preview.FieldValidation
}

// CheckCreate names the failure of a converted object on the API server's create path at the
// target version (package preview), in a file's problems.
const CheckCreate = "create"

// Where an object's version stands in its CRD (ObjectResult.Served).
const (
	VersionServed    = "served"
	VersionNotServed = "not served"
	VersionRemoved   = "not in the CRD"
)

// WriteReport is the result of a write, dry run or check.
type WriteReport struct {
	// CRD names the CRD (the CRDs, joined with ", ", for a release).
	CRD string `json:"crd"`
	// To is the target version; "" when each CRD goes to its own storage version (Targets).
	To      string        `json:"to"`
	Targets []WriteTarget `json:"targets"`
	Mode    string        `json:"mode"` // write, dry-run or check
	// KubeVersion is the Kubernetes version whose create path judged the converted objects.
	KubeVersion string       `json:"kubeVersion,omitempty"`
	Files       []FileResult `json:"files"`
	// Objects counts the objects of the CRDs found; Converted those converted (or to convert,
	// for check); AtTarget those already at their target version.
	Objects   int `json:"objects"`
	Converted int `json:"converted"`
	AtTarget  int `json:"atTarget"`
	// Conversions are the reports of the conversion runs, one per CRD with objects to
	// convert (checks, findings, latency); none for check.
	Conversions []*Report `json:"conversions,omitempty"`
	// Interrupted is the file at hand when the run was interrupted (the context ended): it was
	// left as it was, as were the files after it; the files before it are in Files (or were
	// given to WriteOptions.File), each rewritten whole or not at all.
	Interrupted string `json:"interrupted,omitempty"`
	// InterruptedListing is the file whose result WriteOptions.File was printing when the run
	// was interrupted: that file was done (written, unless a dry run or a check) and its
	// listing cut short; the files after it were left as they were.
	InterruptedListing string `json:"interruptedListing,omitempty"`

	// given counts the files given to WriteOptions.File (not in Files): their problems and
	// the files written.
	given fileCounts
}

// fileCounts counts the results of files.
type fileCounts struct{ problems, written int }

func (c *fileCounts) add(f FileResult) {
	switch f.Status {
	case FileNotProven, FileTemplate, FileUnparsable, FileStillOld:
		c.problems++
	case FileWritten, FileWrittenLoss:
		c.written++
	}
}

// counts are the counts of every file of the report, in Files or given to WriteOptions.File.
func (r *WriteReport) counts() fileCounts {
	c := r.given
	for _, f := range r.Files {
		c.add(f)
	}
	return c
}

// WriteTarget is one CRD of the run and the version its objects go to.
type WriteTarget struct {
	CRD   string `json:"crd"`
	Group string `json:"group"`
	Kind  string `json:"kind"`
	To    string `json:"to"`
}

// Unreachable is the first conversion webhook that could not be reached ("" when none).
func (r *WriteReport) Unreachable() (crd, reason string) {
	for _, c := range r.Conversions {
		if c.Unreachable != "" {
			return c.CRD, c.Unreachable
		}
	}
	return "", ""
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

	// spool holds the objects' results and the diff instead of Objects and Diff, for a file
	// given to WriteOptions.File (memory bounded by a document: writespool.go); read them with
	// Len, EachObject, WriteDiff, WriteJSON or Loaded.
	spool *fileSpool
}

// ObjectResult is one object of a CRD below its target version in a file.
type ObjectResult struct {
	Document int    `json:"document"` // 1-based
	Line     int    `json:"line"`     // of the document's first line
	Kind     string `json:"kind"`
	Name     string `json:"name"` // namespace/name
	From     string `json:"from"`
	To       string `json:"to"`
	// Served says where From stands in the CRD: served, not served, or not in the CRD (a
	// version the release removed).
	Served string `json:"served"`
	// Problems are the failed checks that stop the file from being written; Dropped what
	// --allow-data-loss let go.
	Problems []Finding `json:"problems,omitempty"`
	Dropped  []Finding `json:"dropped,omitempty"`
	// Warnings are the checks the API server does not fail on (convert's warnings): listed,
	// and not in the way of the write unless Strict.
	Warnings []Finding `json:"warnings,omitempty"`
	// Added is what the round trip added or normalised (convert's loss rule, Diff): listed,
	// never a loss, never in the way of the write.
	Added []Change `json:"added,omitempty"`
	// DroppedComments are the comment lines that went with a field the conversion removed
	// (a comment has no place in the converted object once its field is gone: listed, for
	// the person to carry over by hand).
	DroppedComments []string `json:"droppedComments,omitempty"`
}

// Problems is the number of files not converted (or, for check, still at an old version).
func (r *WriteReport) Problems() int { return r.counts().problems }

// Written is the number of files rewritten.
func (r *WriteReport) Written() int { return r.counts().written }

// document is one YAML document of a file, with its exact byte range.
type document struct {
	text  []byte // content, without its "---" separator line
	sep   []byte // the "---" line after it ("" for the file's last)
	line  int
	index int // 1-based, among the documents that parse to something
	// result is the index of its object's result in the file's results.
	result  int
	node    *kyaml.RNode
	obj     map[string]any
	version string // of the CRD below the target; "" when not to convert
	source  string
	target  *writeTarget
	out     []byte         // the converted document
	written map[string]any // out, read back
	// droppedComments are the comment lines of fields the conversion removed (they go with
	// their field), in the order of the file.
	droppedComments []string
}

// writeTarget is one CRD of a run: its target version, and (made when first needed) the
// conversion run and the previewer of its create path.
type writeTarget struct {
	WriteTarget
	crd       *apiextensionsv1.CustomResourceDefinition
	served    map[string]bool // version -> served
	run       *runner
	previewer *preview.Previewer
	converted map[string][2]map[string]any // of the batch at hand: source -> sent, converted
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

// Write converts the CRDs' objects in opts.Files and rewrites the files that are proven.
func Write(ctx context.Context, opts WriteOptions) (*WriteReport, error) {
	return writeOrCheck(ctx, opts, false)
}

// Check lists the CRDs' objects in opts.Files still at a version other than the target,
// converting nothing.
func Check(ctx context.Context, opts WriteOptions) (*WriteReport, error) {
	return writeOrCheck(ctx, opts, true)
}

// writeTargets are the run's CRDs, by group and kind.
func writeTargets(opts WriteOptions) (map[string]*writeTarget, []WriteTarget, error) {
	crds := opts.CRDs
	if len(crds) == 0 && opts.CRD != nil {
		crds = []*apiextensionsv1.CustomResourceDefinition{opts.CRD}
	}
	if len(crds) == 0 {
		return nil, nil, fmt.Errorf("no CustomResourceDefinition given")
	}
	byKind := map[string]*writeTarget{}
	var list []WriteTarget
	for _, crd := range crds {
		t := &writeTarget{crd: crd, served: map[string]bool{}}
		for _, v := range crd.Spec.Versions {
			t.served[v.Name] = v.Served
		}
		t.WriteTarget = WriteTarget{CRD: crd.Name, Group: crd.Spec.Group, Kind: crd.Spec.Names.Kind, To: opts.To}
		if t.To == "" {
			t.To = crdinfo.StorageVersion(crd)
			if t.To == "" {
				return nil, nil, fmt.Errorf("%s: no version is marked storage: true; give the version to convert to with --to", crd.Name)
			}
		}
		if _, ok := t.served[t.To]; !ok {
			return nil, nil, fmt.Errorf("%s has no version %q", crd.Name, t.To)
		}
		key := t.Group + "/" + t.Kind
		if prev, dup := byKind[key]; dup {
			return nil, nil, fmt.Errorf("%s and %s both define kind %s in group %s: give one of them", prev.CRD, crd.Name, t.Kind, t.Group)
		}
		byKind[key] = t
		list = append(list, t.WriteTarget)
	}
	sort.Slice(list, func(i, j int) bool { return list[i].CRD < list[j].CRD })
	return byKind, list, nil
}

func writeOrCheck(ctx context.Context, opts WriteOptions, check bool) (*WriteReport, error) {
	targets, list, err := writeTargets(opts)
	if err != nil {
		return nil, err
	}
	rep := &WriteReport{To: opts.To, Targets: list, Mode: "write", Files: []FileResult{}}
	names := make([]string, len(list))
	for i, t := range list {
		names[i] = t.CRD
	}
	rep.CRD = strings.Join(names, ", ")
	switch {
	case check:
		rep.Mode = "check"
	case opts.DryRun:
		rep.Mode = "dry-run"
	}
	if !check {
		v, err := kubeversion.Require(opts.KubeVersion)
		if err != nil {
			return nil, err
		}
		rep.KubeVersion = v.String()
	}
	paths, err := ExpandFiles(opts.Files)
	if err != nil {
		return nil, err
	}
	w := &writer{opts: opts, check: check, targets: targets, rep: rep}
	if opts.File != nil {
		rep.Files = nil // given to File as they come
	}
	for _, p := range paths {
		err := ctx.Err()
		if err == nil {
			err = w.file(ctx, p)
		}
		if err != nil && ctx.Err() != nil {
			if errors.Is(err, errListingInterrupted) {
				rep.InterruptedListing = p
			} else {
				rep.Interrupted = p
			}
			rep.Conversions = finishRuns(targets)
			return rep, ctx.Err()
		}
		if err != nil {
			return rep, err
		}
	}
	rep.Conversions = finishRuns(targets)
	return rep, nil
}

// finishRuns are the reports of the targets' conversion runs, by CRD.
func finishRuns(targets map[string]*writeTarget) []*Report {
	var used []*writeTarget
	for _, t := range targets {
		if t.run != nil {
			used = append(used, t)
		}
	}
	sort.Slice(used, func(i, j int) bool { return used[i].CRD < used[j].CRD })
	var out []*Report
	for _, t := range used {
		out = append(out, t.run.finishRun())
	}
	return out
}

// writer converts, proves and writes one file at a time.
type writer struct {
	opts    WriteOptions
	check   bool
	targets map[string]*writeTarget
	rep     *WriteReport
}

// add adds a file's result to the report, or gives it to WriteOptions.File.
func (w *writer) add(ctx context.Context, res FileResult) error {
	if w.opts.File == nil {
		l, err := res.Loaded()
		if err != nil {
			return err
		}
		w.rep.Files = append(w.rep.Files, l)
		return nil
	}
	w.rep.given.add(res)
	if err := w.opts.File(w.rep, res); err != nil {
		if ctx.Err() != nil { // the file is done: only its listing was cut short
			return fmt.Errorf("%w: %w", errListingInterrupted, err)
		}
		return err
	}
	return nil
}

// errListingInterrupted marks an error of WriteOptions.File under an ended context: the file
// was done, its result not all printed.
var errListingInterrupted = errors.New("interrupted while its result was printed")

func (w *writer) sortedTargets() []*writeTarget {
	out := make([]*writeTarget, 0, len(w.targets))
	for _, t := range w.targets {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CRD < out[j].CRD })
	return out
}

// convert sends objects (a batch of one file's, of t's CRD) through t's conversion run, there and back,
// and adds their findings and what their round trip added or normalised.
func (w *writer) convert(ctx context.Context, t *writeTarget, objects []Object, findings map[string][]Finding, added map[string][]Change) error {
	t.converted = map[string][2]map[string]any{}
	if t.run == nil {
		o := w.opts.Options
		o.CRD, o.To, o.RoundTrip, o.Progress = t.crd, t.To, true, nil
		if Strategy(t.crd) == string(apiextensionsv1.WebhookConverter) && w.opts.TransportFor != nil {
			tr, err := w.opts.TransportFor(t.crd)
			if err != nil {
				return err
			}
			o.Transport = tr
		}
		r, err := newRunner(o, false)
		if err != nil {
			return err
		}
		t.run = r
	}
	conv := t.converted
	t.run.opts.Converted = func(source string, sent, c map[string]any) { conv[source] = [2]map[string]any{sent, c} }
	// The run gives each page's findings here and keeps none: they go to the objects' results,
	// and so do what the round trips added (the run keeps the counts).
	t.run.opts.Page = func(p PageResult) error {
		for _, fd := range p.Findings {
			findings[fd.Object] = append(findings[fd.Object], fd)
		}
		return nil
	}
	if t.run.stop {
		return nil // the webhook could not be reached: nothing more is sent
	}
	if err := t.run.page(ctx, objects); err != nil {
		return err
	}
	for _, c := range t.run.tally.added {
		added[c.Object] = append(added[c.Object], c)
	}
	t.run.tally.added = t.run.tally.added[:0]
	return nil
}

// create runs the API server's create path for the converted document at its target
// version; a rejection is a problem, worded with the server's errors.
func (w *writer) create(ctx context.Context, t *writeTarget, d *document) *Finding {
	fail := func(detail string) *Finding {
		return &Finding{Object: d.source, Check: CheckCreate, Detail: detail, Severity: SeverityError}
	}
	if t.previewer == nil {
		var opts []preview.Option
		if !w.opts.KubeVersion.IsZero() {
			opts = append(opts, preview.WithKubeVersion(w.opts.KubeVersion))
		}
		p, err := preview.NewPreviewer(t.crd, opts...)
		if err != nil {
			return fail(err.Error())
		}
		t.previewer = p
	}
	js, err := utiljson.Marshal(d.written) // the document as written, read back by verifyDocument
	if err != nil {
		return fail(err.Error())
	}
	fv := w.opts.FieldValidation
	if fv == "" {
		fv = preview.FieldValidationStrict
	}
	r, err := t.previewer.Create(ctx, js, preview.PreviewOptions{FieldValidation: fv})
	if err != nil {
		return fail(fmt.Sprintf("the API server would refuse it at %s: %v", t.To, err))
	}
	if !r.Accepted() {
		return fail(fmt.Sprintf("the API server (Kubernetes %s) would reject it at %s: %s", t.previewer.KubeVersion(), t.To, strings.Join(preview.ErrorTexts(r.Errors), "; ")))
	}
	return nil
}

func stringOf(v any) string { s, _ := v.(string); return s }

func isSeparator(l []byte) bool {
	l = bytes.TrimRight(l, "\r\n")
	if !bytes.HasPrefix(l, []byte("---")) {
		return false
	}
	rest := l[3:]
	return len(rest) == 0 || rest[0] == ' ' || rest[0] == '\t'
}

// templateReason says why a file is a template by its name (Jsonnet, CUE), or "".
func templateReason(path string) string {
	switch strings.ToLower(filepath.Ext(path)) {
	case ".jsonnet", ".libsonnet":
		return "Jsonnet"
	case ".cue":
		return "CUE"
	}
	return ""
}

// templateMarksInText counts the "{{" in the string values and comments under n.
func templateMarksInText(n *kyaml.Node) int {
	if n == nil {
		return 0
	}
	c := strings.Count(n.HeadComment, "{{") + strings.Count(n.LineComment, "{{") + strings.Count(n.FootComment, "{{")
	if n.Kind == kyaml.ScalarNode {
		c += strings.Count(n.Value, "{{")
	}
	for _, ch := range n.Content {
		c += templateMarksInText(ch)
	}
	return c
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
		idx := groupIndex(l, group)
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

// groupIndex is where "group/" starts in l as a whole group name (not the end of a longer
// one: cluster.x-k8s.io/ inside infrastructure.cluster.x-k8s.io/), or -1.
func groupIndex(l, group string) int {
	for from := 0; ; {
		i := strings.Index(l[from:], group+"/")
		if i < 0 {
			return -1
		}
		i += from
		if i == 0 || !isGroupChar(l[i-1]) {
			return i
		}
		from = i + 1
	}
}

func isGroupChar(c byte) bool { return isVersionChar(c) || c == '.' || c == '-' }

func isVersionChar(c byte) bool { return c >= 'a' && c <= 'z' || c >= '0' && c <= '9' }

// rewriteDocument re-serialises a converted document into d.out, through kyaml: only the
// nodes whose value changes are replaced, comments and key order kept.
func rewriteDocument(d *document, c [2]map[string]any) error {
	orig := string(d.text)
	// An empty status the conversion adds (cert-manager's typed conversion gives every object
	// status: {}) is not written into a manifest that had none: it says nothing, and the file
	// is the user's.
	if _, had := d.obj["status"]; !had {
		if st, ok := c[1]["status"].(map[string]any); ok && len(st) == 0 {
			conv := maps.Clone(c[1])
			delete(conv, "status")
			c[1] = conv
		}
	}
	removed := map[string]bool{}
	if err := applyChange(d.node, c[0], c[1], removed); err != nil {
		return fmt.Errorf("%s: %v", d.source, err)
	}
	style := kyaml.SequenceIndentStyle(kyaml.DeriveSeqIndentStyle(orig))
	b, err := kyaml.MarshalWithOptions(d.node.Document(), &kyaml.EncoderOptions{SeqIndent: style})
	if err != nil {
		return fmt.Errorf("%s: %v", d.source, err)
	}
	// What is written must read back as the converted object, and keep every comment.
	written, err := verifyDocument(d.source, orig, b, c[0], c[1], d.obj, removed)
	if err != nil {
		return err
	}
	d.out, d.written = keepBlankLines(orig, b), written
	d.droppedComments = nil
	for _, l := range strings.Split(orig, "\n") {
		if t := strings.TrimSpace(l); strings.HasPrefix(t, "#") && removed[t] && !bytes.Contains(b, []byte(t)) {
			d.droppedComments = append(d.droppedComments, t)
		}
	}
	return nil
}

// keepBlankLines gives the re-serialised document b the blank lines orig starts and ends with
// (kyaml drops them), so that only the lines of the converted fields change.
func keepBlankLines(orig string, b []byte) []byte {
	lead := orig[:len(orig)-len(strings.TrimLeft(orig, " \t\r\n"))]
	lead = lead[:strings.LastIndexByte(lead, '\n')+1] // whole blank lines only
	trail := orig[len(strings.TrimRight(orig, " \t\r\n")):]
	out := make([]byte, 0, len(lead)+len(b)+len(trail))
	out = append(out, lead...)
	out = append(out, bytes.TrimRight(b, "\n")...)
	if trail == "" {
		return out
	}
	if i := strings.IndexByte(trail, '\n'); i >= 0 {
		trail = trail[i:] // the spaces ending the last line went with it
	}
	return append(out, trail...)
}

// verifyDocument checks the re-serialised document: every comment line of the original is
// still there (but those of the fields the conversion removed), and it parses to the file's
// object with the conversion's changes applied.
func verifyDocument(source, orig string, got []byte, sent, conv, fileObj map[string]any, removed map[string]bool) (map[string]any, error) {
	for _, l := range strings.Split(orig, "\n") {
		t := strings.TrimSpace(l)
		if strings.HasPrefix(t, "#") && !removed[t] && !bytes.Contains(got, []byte(t)) {
			return nil, fmt.Errorf("%s: the comment %q would be lost", source, t)
		}
	}
	n, err := kyaml.Parse(string(got))
	if err != nil {
		return nil, fmt.Errorf("%s: the rewritten document does not parse: %v", source, err)
	}
	js, err := n.MarshalJSON()
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := utiljson.Unmarshal(js, &m); err != nil {
		return nil, err
	}
	want, _ := applyMap(fileObj, sent, conv).(map[string]any)
	if d := Diff(want, m); len(d) > 0 {
		return nil, fmt.Errorf("%s: the rewritten document differs from the conversion at %s: %s", source, d[0].Path, d[0].Detail)
	}
	return m, nil
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
