package preview

import (
	"fmt"
	"strings"

	"github.com/crdver/kubectl-crdver/crdschema"
)

// FieldValidation is the request's fieldValidation directive.
type FieldValidation string

// The three fieldValidation directives of the API server.
const (
	// Warn: unknown and duplicate fields are dropped and reported as warnings (client-go's and
	// kubectl --validate=warn's default).
	FieldValidationWarn FieldValidation = "Warn"
	// Strict: unknown and duplicate fields reject the object (kubectl's default, --validate=strict).
	FieldValidationStrict FieldValidation = "Strict"
	// Ignore: unknown fields are dropped silently.
	FieldValidationIgnore FieldValidation = "Ignore"
)

// ParseFieldValidation accepts Warn, Strict and Ignore (any case); "" is Warn.
func ParseFieldValidation(s string) (FieldValidation, error) {
	switch strings.ToLower(s) {
	case "", "warn":
		return FieldValidationWarn, nil
	case "strict":
		return FieldValidationStrict, nil
	case "ignore":
		return FieldValidationIgnore, nil
	}
	return "", fmt.Errorf("field validation %q is not one of Warn, Strict, Ignore", s)
}

// Verdicts of a preview.
const (
	Accepted = "accepted"
	Rejected = "rejected"
)

// PreviewError is a validation error the API server would return, with its field path.
type PreviewError struct {
	Field   string `json:"field,omitempty"`
	Type    string `json:"type"`
	Message string `json:"message"`
}

// PreviewResult is what the API server would do with one object. Its JSON form is part of
// `kubectl crdver preview -o json`'s stable output.
type PreviewResult struct {
	// Operation is create, or update when an old object was given.
	Operation  string `json:"operation"`
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Namespace  string `json:"namespace,omitempty"`
	Name       string `json:"name,omitempty"`
	// Version is the version the object was written in (the request's version).
	Version string `json:"version"`
	// ReadVersion is the version Object is shown in.
	ReadVersion string `json:"readVersion"`
	// StorageVersion is the CRD's storage version.
	StorageVersion string `json:"storageVersion"`
	// Verdict is accepted or rejected.
	Verdict string `json:"verdict"`
	// Object is the object as the API server would return it (without the random uid and
	// creationTimestamp); nil when rejected.
	Object map[string]any `json:"object,omitempty"`
	// Pruned lists the unknown fields that were dropped (JSON paths like spec.foo[0].bar).
	Pruned []string `json:"pruned"`
	// PrunedOnConversion lists the fields dropped after the object was converted to the storage
	// version or to the read version (strategy None: fields the other schema does not know).
	PrunedOnConversion []string `json:"prunedOnConversion"`
	// DroppedNulls lists null values of non-nullable fields without default that were dropped.
	DroppedNulls []string `json:"droppedNulls"`
	// Defaulted lists the fields that were set from a schema default.
	Defaulted []string `json:"defaulted"`
	// DefaultedOnRead lists the fields the storage decoder's defaulting set after validation
	// (for instance status, dropped by the status subresource, defaulted again on read).
	DefaultedOnRead []string `json:"defaultedOnRead"`
	// Warnings are what the API server would send back as warnings.
	Warnings []string `json:"warnings"`
	// Errors are the reasons for a rejection.
	Errors []PreviewError `json:"errors"`
	// Notes explain what preview did beyond what a request shows (conversion, storage).
	Notes []string `json:"notes"`
}

// ErrorTexts words errors as the API server's messages do: "field: message" (the message
// alone when it already names the field).
func ErrorTexts(errs []PreviewError) []string {
	out := make([]string, 0, len(errs))
	for _, e := range errs {
		if e.Field != "" && e.Field != "<nil>" && !strings.HasPrefix(e.Message, e.Field) {
			out = append(out, e.Field+": "+e.Message)
		} else {
			out = append(out, e.Message)
		}
	}
	return out
}

// Accepted reports whether the API server would accept the object.
func (r *PreviewResult) Accepted() bool { return r.Verdict == Accepted }

// InputError is a problem with the input rather than with the object's content: the object
// does not belong to the CRD, or names a version the CRD does not serve. The API server would
// refuse such a request before looking at the object.
type InputError struct{ Err error }

func (e *InputError) Error() string { return e.Err.Error() }
func (e *InputError) Unwrap() error { return e.Err }

func inputErrorf(format string, args ...any) error {
	return &InputError{Err: fmt.Errorf(format, args...)}
}

// NonStructuralError says that a version's schema is not structural: the API server would not
// prune or default with it, and preview refuses to pretend.
type NonStructuralError struct {
	CRD        string
	Version    string
	Violations []crdschema.Violation
}

func (e *NonStructuralError) Error() string {
	msgs := make([]string, 0, len(e.Violations))
	for _, v := range e.Violations {
		msgs = append(msgs, v.Field+": "+v.Message)
	}
	return fmt.Sprintf("%s: the schema of version %q is not structural (%d violations: %s); the API server would not prune or default with it (kubectl crdver explain lists them)",
		e.CRD, e.Version, len(e.Violations), strings.Join(msgs, "; "))
}

// PreviewOptions tune a preview.
type PreviewOptions struct {
	// FieldValidation is the request's directive ("" is Warn).
	FieldValidation FieldValidation
	// ReadVersion is the version to show the result in ("" is the object's own version). With
	// conversion strategy None it is what a GET at that version returns after the create.
	ReadVersion string
	// Namespace is the request namespace for objects without metadata.namespace ("" is
	// "default"); ignored for cluster-scoped CRDs.
	Namespace string
}
