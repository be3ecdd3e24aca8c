package kubeversion

import (
	"fmt"
	"strings"
)

// Check names of Difference.Checks: the judgements a difference changes.
const (
	CheckObjectValidation = "object validation" // preview, plan's re-create and no-op update
	CheckCRDValidation    = "CRD validation"    // CRD files, plan's apply verdict, doctor
)

// Difference is a behaviour of the API server that changed between minor versions and that
// no version switch of the linked code covers: the linked code behaves as the newer versions
// whatever version is emulated. A verdict that depends on one carries its Note.
type Difference struct {
	// ID is a stable name (JSON, docs/kubernetes-versions.md).
	ID string `json:"id"`
	// Checks are the judgements it changes (CheckObjectValidation, CheckCRDValidation).
	Checks []string `json:"checks"`
	// Summary says what changed and where, in one line.
	Summary string `json:"summary"`
	// Before is what versions up to OldUntil do, After what versions from NewSince do (as the
	// linked code does).
	Before string `json:"before"`
	After  string `json:"after"`
	// OldUntil is the newest version measured to behave the old way; NewSince the oldest
	// measured to behave the new way. Versions in between are not known.
	OldUntil Version `json:"oldUntil"`
	NewSince Version `json:"newSince"`
	// WordingOnly: only the wording of a message differs, never a verdict; no verdict carries
	// its note.
	WordingOnly bool `json:"wordingOnly,omitempty"`
	// Match reports whether an error or warning text of the linked code is this difference
	// (nil for a wording-only difference).
	Match func(message string) bool `json:"-"`
}

// Known differences, measured side by side against real kube-apiservers built from the module
// proxy (docs/kubernetes-versions.md has the table and how it was measured).
var differences = []Difference{
	{
		ID:     "int32-maximum-format",
		Checks: []string{CheckObjectValidation},
		Summary: "kube-openapi's numeric validator rejects an object when the schema's maximum " +
			"does not fit the field's format (format: int32 with maximum: 4294967295, as metallb's BGPPeer myASN)",
		Before:   "accepts this",
		After:    "rejects it",
		OldUntil: Version{Major: 1, Minor: 35},
		NewSince: Version{Major: 1, Minor: 36},
		Match: func(m string) bool {
			return strings.Contains(m, "Maximum boundary value must be of type")
		},
	},
	{
		ID:     "cel-error-value",
		Checks: []string{CheckObjectValidation},
		Summary: "a failed x-kubernetes-validations rule's error names the value as \"object\" " +
			"(Invalid value: \"object\": …) on servers up to 1.34; from 1.35 (and here) it shows the field's value; " +
			"the verdict and the rule's message are the same (measured by the differential test)",
		Before:      "words the error Invalid value: \"object\"",
		After:       "show the field's value",
		OldUntil:    Version{Major: 1, Minor: 34},
		NewSince:    Version{Major: 1, Minor: 35},
		WordingOnly: true,
	},
}

// Differences lists every known difference (a copy).
func Differences() []Difference {
	return append([]Difference(nil), differences...)
}

// Behaves says how version v behaves for d: "old" (as Before), "new" (as After, and as the
// linked code), or "unknown" (not measured).
func (d Difference) Behaves(v Version) string {
	switch {
	case !d.OldUntil.Less(v):
		return "old"
	case v.AtLeast(d.NewSince):
		return "new"
	}
	return "unknown"
}

func rangeText(from, to Version) string {
	if from == to {
		return from.String()
	}
	return from.String() + "–" + to.String()
}

// Note is the note a verdict that depends on d carries when judged as version v, e.g.
// "Kubernetes 1.34 accepts this; 1.36+ reject it (known difference int32-maximum-format: …)".
func (d Difference) Note(v Version) string {
	v = Effective(v)
	old := rangeText(Oldest, d.OldUntil)
	var head string
	switch d.Behaves(v) {
	case "old":
		head = fmt.Sprintf("Kubernetes %s %s; %s+ %s, as this verdict does", v, d.Before, d.NewSince, verb(d.After, true))
	case "new":
		head = fmt.Sprintf("Kubernetes %s %s; %s+ %s, as here", old, verb(d.Before, old != Oldest.String()), d.NewSince, verb(d.After, true))
	default:
		head = fmt.Sprintf("Kubernetes %s %s; %s+ %s; %s is not measured: this verdict is %s+'s", old, verb(d.Before, old != Oldest.String()), d.NewSince, verb(d.After, true), v, d.NewSince)
	}
	return fmt.Sprintf("%s (known difference %s: %s)", head, d.ID, d.Summary)
}

// verb turns "accepts the object" into "accept the object" for a plural subject.
func verb(s string, plural bool) string {
	if !plural {
		return s
	}
	first, rest, _ := strings.Cut(s, " ")
	if strings.HasSuffix(first, "s") {
		first = strings.TrimSuffix(first, "s")
	}
	if rest == "" {
		return first
	}
	return first + " " + rest
}

// NotesFor is the notes for messages (errors or warnings of one verdict of check) judged as
// version v: one per known difference that any message matches, in table order.
func NotesFor(v Version, check string, messages []string) []string {
	var notes []string
	for _, d := range differences {
		if d.WordingOnly || d.Match == nil || !hasCheck(d, check) {
			continue
		}
		for _, m := range messages {
			if d.Match(m) {
				notes = append(notes, d.Note(v))
				break
			}
		}
	}
	return notes
}

func hasCheck(d Difference, check string) bool {
	for _, c := range d.Checks {
		if c == check {
			return true
		}
	}
	return false
}
