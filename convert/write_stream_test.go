package convert

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"

	sigsyaml "sigs.k8s.io/yaml"

	"github.com/crdver/kubectl-crdver/internal/atomicfile"
	"github.com/crdver/kubectl-crdver/internal/testwebhook"
)

// cronTabFile writes n v1beta1 CronTabs (each with comments, a ConfigMap at the head) to
// dir/name; those whose index is in lossy have a hostPort, which v1 does not have (a loss:
// the file is not proven).
func cronTabFile(t *testing.T, dir, name string, n int, lossy ...int) (string, string) {
	t.Helper()
	var b strings.Builder
	b.WriteString("# settings <&> ünïcode\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: settings\n")
	for i := 0; i < n; i++ {
		fmt.Fprintf(&b, "---\n# backup %d\napiVersion: stable.example.com/v1beta1\nkind: CronTab\nmetadata:\n  name: ct-%d\n  namespace: default\nspec:\n  cronSpec: \"0 3 * * *\" # at three\n  image: backup:1.2\n", i, i)
		for _, l := range lossy {
			if l == i {
				b.WriteString("  hostPort: db:5432\n")
			}
		}
	}
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return p, b.String()
}

func noTemporaries(t *testing.T, path string) {
	t.Helper()
	if left, err := atomicfile.Temporaries(path); err != nil || len(left) > 0 {
		t.Errorf("temporary files of %s left (%v): %v", path, err, left)
	}
}

// TestWriteSpilledResults: a file's results and diff, spilled to disk as the file goes (a
// spill limit of 64 bytes), read back through WriteOptions.File are the results and the diff
// of the same run kept in memory, WriteJSON writes what json.MarshalIndent gives and WriteYAML
// what sigs.k8s.io/yaml.Marshal gives; once File has returned they are gone, and reading them
// says so.
func TestWriteSpilledResults(t *testing.T) {
	crd := loadCRD(t, "crontab.yaml")
	path, _ := cronTabFile(t, t.TempDir(), "crontabs.yaml", 23)
	opts := WriteOptions{Options: Options{CRD: crd, To: "v1", BatchSize: 4}, Files: []string{path}, DryRun: true}
	rep, err := Write(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Files) != 1 || rep.Files[0].Status != FileWouldWrite || len(rep.Files[0].Objects) != 23 || rep.Files[0].Diff == "" {
		t.Fatalf("in memory: %+v", rep.Files)
	}
	want := rep.Files[0]
	wantJSON, err := json.MarshalIndent(want, "    ", "  ")
	if err != nil {
		t.Fatal(err)
	}

	wantYAML, err := sigsyaml.Marshal(want)
	if err != nil {
		t.Fatal(err)
	}

	defer lowerSpillLimit(64)()
	var kept FileResult
	opts.File = func(_ *WriteReport, f FileResult) error {
		kept = f
		if f.spool == nil || f.spool.objects.f == nil || f.spool.diff.f == nil {
			t.Errorf("the results were not spilled to disk past %d bytes", spillLimit)
		}
		if f.Len() != 23 || f.Objects != nil || f.Diff != "" {
			t.Errorf("spilled: Len %d, Objects %d, Diff %d bytes; want 23 read back, none in memory", f.Len(), len(f.Objects), len(f.Diff))
		}
		var objs []ObjectResult
		if err := f.EachObject(func(o ObjectResult) error { objs = append(objs, o); return nil }); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(objs, want.Objects) {
			t.Errorf("objects read back:\n%+v\nwant\n%+v", objs, want.Objects)
		}
		var diff bytes.Buffer
		if err := f.WriteDiff(&diff); err != nil || diff.String() != want.Diff {
			t.Errorf("diff read back (%v):\n%s\nwant\n%s", err, diff.String(), want.Diff)
		}
		var js bytes.Buffer
		if err := f.WriteJSON(&js, "    ", "  "); err != nil || js.String() != string(wantJSON) {
			t.Errorf("WriteJSON (%v):\n%s\nwant json.MarshalIndent's:\n%s", err, js.String(), wantJSON)
		}
		var y bytes.Buffer
		if err := f.WriteYAML(&y); err != nil || y.String() != string(wantYAML) {
			t.Errorf("WriteYAML (%v):\n%s\nwant sigs.k8s.io/yaml.Marshal's (what -o yaml printed of the file whole):\n%s", err, y.String(), wantYAML)
		}
		if l, err := f.Loaded(); err != nil || !reflect.DeepEqual(l, want) {
			t.Errorf("Loaded (%v): %+v", err, l)
		}
		return nil
	}
	if _, err := Write(context.Background(), opts); err != nil {
		t.Fatal(err)
	}
	if err := kept.EachObject(func(ObjectResult) error { return nil }); !errors.Is(err, errSpoolGone) {
		t.Errorf("objects read after File returned: %v, want %v", err, errSpoolGone)
	}
}

// TestWriteJSONString: a diff longer than a chunk, without a newline, with runes cut at the
// chunk's end, HTML characters and a byte that is not UTF-8, is the JSON string json.Marshal
// makes of it.
func TestWriteJSONString(t *testing.T) {
	for _, s := range []string{
		"",
		"a\nb\n<&>\u2028\"\\\t\n",
		strings.Repeat("é", 70<<10) + "\xff<x>",
		strings.Repeat("x", 64<<10-1) + "日本語\n" + strings.Repeat("ü", 40<<10),
	} {
		var got bytes.Buffer
		if err := writeJSONString(&got, strings.NewReader(s)); err != nil {
			t.Fatal(err)
		}
		want, _ := json.Marshal(s)
		if got.String() != string(want) {
			t.Errorf("string of %d bytes: %d bytes written, want json.Marshal's %d", len(s), got.Len(), len(want))
		}
	}
}

// TestWriteRefusalInLaterDocument: a refusal in the 9th of 12 objects, after four batches of
// two were converted and written to the new file, leaves the file as it was, byte for byte,
// and no temporary file; the result names the object refused and only it.
func TestWriteRefusalInLaterDocument(t *testing.T) {
	defer lowerSpillLimit(64)()
	crd := loadCRD(t, "crontab.yaml")
	path, text := cronTabFile(t, t.TempDir(), "crontabs.yaml", 12, 8)
	rep, err := Write(context.Background(), WriteOptions{Options: Options{CRD: crd, To: "v1", BatchSize: 2}, Files: []string{path}})
	if err != nil {
		t.Fatal(err)
	}
	if len(rep.Files) != 1 || rep.Files[0].Status != FileNotProven || rep.Written() != 0 {
		t.Fatalf("files %+v, written %d; want one not proven, none written", rep.Files, rep.Written())
	}
	for i, o := range rep.Files[0].Objects {
		if refused := len(o.Problems) > 0; refused != (i == 8) {
			t.Errorf("object %d (%s): problems %v; want problems only for ct-8", i, o.Name, o.Problems)
		}
	}
	if got := readFile(t, path); got != text {
		t.Errorf("the file changed:\n%s", unifiedDiff(path, []byte(text), []byte(got)))
	}
	noTemporaries(t, path)
}

// cancelAt is a transport that cancels the run at its n-th request, noting whether the new
// file of path was being written then.
type cancelAt struct {
	Transport
	n       int32
	posts   atomic.Int32
	cancel  context.CancelFunc
	path    string
	writing bool
}

func (c *cancelAt) Post(ctx context.Context, body []byte) (*HTTPResponse, error) {
	if c.posts.Add(1) == c.n {
		left, _ := atomicfile.Temporaries(c.path)
		c.writing = len(left) > 0
		c.cancel()
	}
	return c.Transport.Post(ctx, body)
}

// TestWriteInterruptedInsideFile: interrupted inside a file whose new content is half
// written (its second batch's request), the run stops: that file is left as it was, byte for
// byte, with no temporary file, and the file before it, done, is rewritten whole.
func TestWriteInterruptedInsideFile(t *testing.T) {
	srv := testwebhook.StartForTest(t, testwebhook.Options{})
	crd := webhookCRD(t, srv)
	tr, err := NewHTTPTransport(crd, TransportOptions{})
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	first, firstText := cronTabFile(t, dir, "a.yaml", 2)
	second, text := cronTabFile(t, dir, "b.yaml", 12)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Batches of 2 documents, each object there and back: a.yaml is 4 requests (the
	// ConfigMap and ct-0, then ct-1); b.yaml's first batch (the ConfigMap and ct-0) is the 5th
	// and 6th, written to its new file; the 7th is its second batch's.
	c := &cancelAt{Transport: tr, n: 7, cancel: cancel, path: second}
	var done []string
	rep, err := Write(ctx, WriteOptions{Options: Options{CRD: crd, To: "v1", Transport: c, BatchSize: 2}, Files: []string{first, second},
		File: func(_ *WriteReport, f FileResult) error { done = append(done, f.Path+": "+f.Status); return nil }})
	if !errors.Is(err, context.Canceled) || rep == nil || rep.Interrupted != second {
		t.Fatalf("err %v, report %+v; want canceled, %s interrupted", err, rep, second)
	}
	if !c.writing {
		t.Fatalf("no new file of %s was being written at request %d: the interrupt was not inside the file", second, c.n)
	}
	if got := readFile(t, second); got != text {
		t.Errorf("%s changed:\n%s", second, unifiedDiff(second, []byte(text), []byte(got)))
	}
	noTemporaries(t, second)
	if want := []string{first + ": " + FileWritten}; !reflect.DeepEqual(done, want) {
		t.Errorf("files done %v, want %v", done, want)
	}
	if got := readFile(t, first); got != strings.ReplaceAll(firstText, "stable.example.com/v1beta1", "stable.example.com/v1") {
		t.Errorf("%s not rewritten whole:\n%s", first, got)
	}
}

// TestCheckWritesNothing: --check of a file whose results are spilled (past 64 bytes) lists
// every object to convert and writes nothing beside the file: while its result is given, and
// after, the folder holds the file alone, as it was.
func TestCheckWritesNothing(t *testing.T) {
	defer lowerSpillLimit(64)()
	crd := loadCRD(t, "crontab.yaml")
	dir := t.TempDir()
	path, text := cronTabFile(t, dir, "crontabs.yaml", 12, 8)
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	only := func(when string) {
		entries, err := os.ReadDir(dir)
		if err != nil || len(entries) != 1 || entries[0].Name() != "crontabs.yaml" {
			t.Errorf("%s: the folder holds %v (%v), want crontabs.yaml alone", when, entries, err)
		}
	}
	var n int
	var status string
	rep, err := Check(context.Background(), WriteOptions{Options: Options{CRD: crd, To: "v1", BatchSize: 2}, Files: []string{path},
		File: func(_ *WriteReport, f FileResult) error {
			only("while the result is given")
			status, n = f.Status, f.Len()
			return f.EachObject(func(ObjectResult) error { return nil })
		}})
	if err != nil {
		t.Fatal(err)
	}
	if status != FileStillOld || n != 12 || rep.Converted != 12 {
		t.Errorf("status %q, %d objects listed, %d to convert; want %q, 12, 12", status, n, rep.Converted, FileStillOld)
	}
	only("after")
	if got, err := os.Stat(path); err != nil || readFile(t, path) != text || !got.ModTime().Equal(st.ModTime()) {
		t.Errorf("the file changed (%v)", err)
	}
}
