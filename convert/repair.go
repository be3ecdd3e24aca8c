package convert

// repair.go: the paths of the API server's field errors, and the repair of a generated object
// that the API server rejects (dropping the optional fields the errors name).

import (
	"github.com/crdver/kubectl-crdver/preview"
	"regexp"
	"strconv"
	"strings"

	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
)

// quotedSubject is how kube-openapi names the field of a composite (oneOf, anyOf, allOf, not)
// error, which the API server reports without a field path (validation.go's
// kubeOpenAPIResultToFieldErrors: field.Invalid(fldPath, "", err.Error()) with a nil root):
// `"spec.trafficPolicy.loadBalancer" must validate one and only one schema (oneOf)`.
var quotedSubject = regexp.MustCompile(`^(?:Invalid value: "[^"]*": )?"([^"]+)" must `)

// ErrorPath turns a field error's path into a finding path: ".spec.port". The API server
// reports errors about the object as a whole, and kube-openapi's composite errors, with a nil
// path ("<nil>"); the field a composite error is about is then read from its message, and an
// error about the whole object gets ".".
func ErrorPath(fieldPath, message string) string {
	if fieldPath != "" && fieldPath != "<nil>" {
		return "." + strings.TrimPrefix(fieldPath, ".")
	}
	if m := quotedSubject.FindStringSubmatch(message); m != nil && m[1] != "." {
		return "." + strings.TrimPrefix(m[1], ".")
	}
	return "."
}

// pathSeg is one step of a field path: a property or map key, or a list index.
type pathSeg struct {
	key     string
	index   int
	isIndex bool
}

// parsePath splits ".spec.items[2].name" and ".metadata.labels[app.kubernetes.io/name]" (the
// API server's field.Path form; map keys in brackets) into steps.
func parsePath(p string) []pathSeg {
	var out []pathSeg
	p = strings.TrimPrefix(p, ".")
	for len(p) > 0 {
		switch p[0] {
		case '.':
			p = p[1:]
		case '[':
			end := strings.IndexByte(p, ']')
			if end < 0 {
				return out
			}
			in := p[1:end]
			if n, err := strconv.Atoi(in); err == nil {
				out = append(out, pathSeg{index: n, isIndex: true})
			} else {
				out = append(out, pathSeg{key: strings.Trim(in, `"`)})
			}
			p = p[end+1:]
		default:
			end := strings.IndexAny(p, ".[")
			if end < 0 {
				end = len(p)
			}
			out = append(out, pathSeg{key: p[:end]})
			p = p[end:]
		}
	}
	return out
}

// repairObject drops, for each error, the deepest optional node on the error's path: an
// object property its parent does not require, or a list item. It reports whether it
// changed anything.
func repairObject(obj map[string]any, s *structuralschema.Structural, errs []preview.PreviewError) bool {
	changed := false
	seen := map[string]bool{}
	for _, e := range errs {
		path := ErrorPath(e.Field, e.Message)
		if path == "." || seen[path] {
			continue
		}
		seen[path] = true
		if dropOptional(obj, s, parsePath(path)) {
			changed = true
		}
	}
	return changed
}

// dropOptional walks obj and its schema along segs and deletes the deepest optional node on
// the way. List items are removed from their list (the parent map is updated).
func dropOptional(obj map[string]any, root *structuralschema.Structural, segs []pathSeg) bool {
	var drop func() // removes the deepest optional node seen so far
	var cur any = obj
	s := root
	var parent map[string]any // the map holding cur, and cur's key in it
	var parentKey string
	for depth, seg := range segs {
		switch v := cur.(type) {
		case map[string]any:
			next, ok := v[seg.key]
			if seg.isIndex || !ok {
				return run(drop)
			}
			var child *structuralschema.Structural
			if s != nil {
				if p, ok := s.Properties[seg.key]; ok {
					child = &p
				} else if s.AdditionalProperties != nil {
					child = s.AdditionalProperties.Structural
				}
				_, isProp := s.Properties[seg.key]
				topLevel := depth == 0 && (seg.key == "apiVersion" || seg.key == "kind" || seg.key == "metadata")
				if (!isProp || !isRequired(s, seg.key)) && !topLevel {
					m, k := v, seg.key
					drop = func() { delete(m, k) }
				}
			}
			parent, parentKey = v, seg.key
			cur, s = next, child
		case []any:
			if !seg.isIndex || seg.index < 0 || seg.index >= len(v) {
				return run(drop)
			}
			if parent != nil {
				m, k, l, i := parent, parentKey, v, seg.index
				drop = func() { m[k] = append(append([]any{}, l[:i]...), l[i+1:]...) }
			}
			var child *structuralschema.Structural
			if s != nil {
				child = s.Items
			}
			parent = nil
			cur, s = v[seg.index], child
		default:
			return run(drop)
		}
	}
	return run(drop)
}

func run(f func()) bool {
	if f == nil {
		return false
	}
	f()
	return true
}
