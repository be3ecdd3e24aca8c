package plugin

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/cli-runtime/pkg/genericiooptions"
)

// zeros is an endless stream of zero bytes, like /dev/zero.
type zeros struct{}

func (zeros) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = 0
	}
	return len(p), nil
}

// TestVersionsFromDevZero: `versions -f - < /dev/zero` fails with one clear line (here with a
// bounded reader of 64 MiB standing in for /dev/zero).
func TestVersionsFromDevZero(t *testing.T) {
	streams, _, out, errOut := newTestStreams(io.LimitReader(zeros{}, 64<<20))
	root := NewRootCmd(streams)
	root.SetArgs([]string{"versions", "-f", "-"})
	err := root.ExecuteContext(context.Background())
	if ExitCode(err) != ExitUsage || !strings.Contains(err.Error(), "stdin (document 1): larger than 16 MiB") {
		t.Fatalf("exit %d, error %v; want 2 and the size limit", ExitCode(err), err)
	}
	if out.Len() != 0 || errOut.Len() != 0 {
		t.Errorf("output on a failed read: %q %q", out.String(), errOut.String())
	}
}

// TestInputErrorsExitCodes: package manifest's errors get their exit codes here (2 for the
// input, 3 when it could not be read, 3 when interrupted), and the ones about flags are worded
// with them; an error of the callback is returned as it is.
func TestInputErrorsExitCodes(t *testing.T) {
	srv := httptest.NewServer(http.FileServer(http.Dir(td("crds"))))
	defer srv.Close()
	gone := httptest.NewServer(http.NotFoundHandler())
	gone.Close() // nothing listens there any more
	each := func(paths []string, opts InputOptions) error {
		return EachDocument(context.Background(), paths, opts, func(Document) error { return nil })
	}
	empty := t.TempDir()
	if err := os.MkdirAll(filepath.Join(empty, "sub"), 0o755); err != nil {
		t.Fatal(err)
	}
	cancelled, cancel := context.WithCancel(context.Background())
	cancel()
	for name, tc := range map[string]struct {
		err  error
		code int
		want string
	}{
		"404":             {each([]string{srv.URL + "/missing.yaml"}, InputOptions{}), ExitUsage, "404 Not Found"},
		"unreachable":     {each([]string{gone.URL + "/crd.yaml"}, InputOptions{}), ExitUnavailable, gone.URL + "/crd.yaml: "},
		"malformed":       {each([]string{"-"}, InputOptions{Stdin: strings.NewReader("just text\n")}), ExitUsage, "stdin (document 1): not a Kubernetes object"},
		"no stdin":        {each([]string{"-"}, InputOptions{}), ExitUsage, "-f -: no standard input"},
		"missing file":    {each([]string{filepath.Join(empty, "nope.yaml")}, InputOptions{}), ExitUsage, "nope.yaml: no such file or directory"},
		"empty directory": {each([]string{empty}, InputOptions{}), ExitUsage, "directory has no .yaml, .yml or .json files (-R reads its subdirectories)"},
		"empty tree":      {each([]string{empty}, InputOptions{Recursive: true}), ExitUsage, "directory tree has no .yaml, .yml or .json files"},
		"interrupted":     {EachDocument(cancelled, []string{"-"}, InputOptions{Stdin: strings.NewReader("")}, func(Document) error { return nil }), ExitUnavailable, "interrupted"},
		"callback": {EachDocument(context.Background(), []string{srv.URL + "/crontab.yaml"}, InputOptions{}, func(Document) error {
			return ProblemsFound("the callback's own error")
		}), ExitProblems, "the callback's own error"},
	} {
		if ExitCode(tc.err) != tc.code || tc.err == nil || !strings.Contains(tc.err.Error(), tc.want) {
			t.Errorf("%s: error %v (exit %d), want exit %d with %q", name, tc.err, ExitCode(tc.err), tc.code, tc.want)
		}
	}
	// Through the command: versions -f URL.
	r := run(t, "", "versions", "-f", srv.URL+"/crontab.yaml", "-o", "json")
	if r.code != 0 || !strings.Contains(r.stdout, `"name": "crontabs.stable.example.com"`) {
		t.Errorf("versions -f URL: exit %d\n%s%s", r.code, r.stdout, r.stderr)
	}
}

func newTestStreams(in io.Reader) (genericiooptions.IOStreams, io.Reader, *bytes.Buffer, *bytes.Buffer) {
	out, errOut := &bytes.Buffer{}, &bytes.Buffer{}
	return genericiooptions.IOStreams{In: in, Out: out, ErrOut: errOut}, in, out, errOut
}
