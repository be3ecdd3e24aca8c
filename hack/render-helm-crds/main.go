// Command render-helm-crds renders cert-manager's Helm-templated CRD sources
// (deploy/crds/crd-*.yaml) the way the project's own build does (deploy/crds/BUILD.bazel:
// helm template, release name and namespace "cert-manager", values creator=static,
// startupapicheck.enabled=false), for the release corpus in testdata/releases. Helm is not
// a dependency: this uses text/template with the chart's _helpers.tpl and the handful of
// Helm/sprig functions those templates call.
//
//	go run ./hack/render-helm-crds HELPERS.tpl VALUES.yaml APPVERSION < crd.yaml > rendered.yaml
package main

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"strings"
	"text/template"

	"sigs.k8s.io/yaml"
)

func empty(v any) bool {
	switch x := v.(type) {
	case nil:
		return true
	case string:
		return x == ""
	case bool:
		return !x
	case map[string]any:
		return len(x) == 0
	case []any:
		return len(x) == 0
	}
	return false
}

func main() {
	if len(os.Args) != 4 {
		fmt.Fprintln(os.Stderr, "usage: render-helm-crds HELPERS.tpl VALUES.yaml APPVERSION < crd.yaml")
		os.Exit(2)
	}
	if err := run(os.Args[1], os.Args[2], os.Args[3], os.Stdin, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "render-helm-crds:", err)
		os.Exit(1)
	}
}

func run(helpersPath, valuesPath, appVersion string, in io.Reader, out io.Writer) error {
	helpers, err := os.ReadFile(helpersPath)
	if err != nil {
		return err
	}
	raw, err := os.ReadFile(valuesPath)
	if err != nil {
		return err
	}
	values := map[string]any{}
	if err := yaml.Unmarshal(raw, &values); err != nil {
		return err
	}
	values["creator"] = "static"
	if s, ok := values["startupapicheck"].(map[string]any); ok {
		s["enabled"] = false
	}
	src, err := io.ReadAll(in)
	if err != nil {
		return err
	}
	var t *template.Template
	funcs := template.FuncMap{
		"default": func(d any, v ...any) any {
			if len(v) == 0 || empty(v[0]) {
				return d
			}
			return v[0]
		},
		"trunc": func(n int, s string) string {
			if len(s) > n {
				return s[:n]
			}
			return s
		},
		"trimSuffix": func(suf, s string) string { return strings.TrimSuffix(s, suf) },
		"contains":   func(sub, s string) bool { return strings.Contains(s, sub) },
		"replace":    func(o, n, s string) string { return strings.ReplaceAll(s, o, n) },
		"quote":      func(s any) string { return fmt.Sprintf("%q", fmt.Sprint(s)) },
		"nindent": func(n int, s string) string {
			pad := strings.Repeat(" ", n)
			return "\n" + pad + strings.ReplaceAll(s, "\n", "\n"+pad)
		},
		"include": func(name string, data any) (string, error) {
			var b bytes.Buffer
			err := t.ExecuteTemplate(&b, name, data)
			return b.String(), err
		},
	}
	t = template.New("crd").Option("missingkey=zero").Funcs(funcs)
	if _, err := t.New("_helpers.tpl").Parse(string(helpers)); err != nil {
		return err
	}
	if _, err := t.Parse(string(src)); err != nil {
		return err
	}
	data := map[string]any{
		"Values":  values,
		"Release": map[string]any{"Name": "cert-manager", "Namespace": "cert-manager", "Service": "Helm"},
		"Chart":   map[string]any{"Name": "cert-manager", "Version": appVersion, "AppVersion": appVersion},
	}
	var b bytes.Buffer
	if err := t.ExecuteTemplate(&b, "crd", data); err != nil {
		return err
	}
	// As helm does: a missing value renders as empty, not "<no value>".
	_, err = out.Write(bytes.ReplaceAll(b.Bytes(), []byte("<no value>"), nil))
	return err
}
