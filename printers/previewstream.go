package printers

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/crdver/kubectl-crdver/preview"
)

// PreviewPrinterOptions say how a PreviewPrinter writes the previews of many objects.
type PreviewPrinterOptions struct {
	// Out gets the results; ErrOut the counts of the "name" format.
	Out, ErrOut io.Writer
	// Format is "" (for people), "json", "yaml" or "name" (one line per object).
	Format string
	// NoHeaders: tables (the violations of a non-structural schema) without their header.
	NoHeaders bool
	// OnlyRejected: the objects the API server would accept are counted, not written.
	OnlyRejected bool
	// Diff: for people, a unified diff from the input to the result (coloured when Color).
	Diff, Color bool
	// Update: the previews are updates of stored objects (the violations of a non-structural
	// schema are then not printed before the error).
	Update bool
	// PreviewerError and InputError word the errors of building a CRD's previewer and of a
	// preview for the caller (nil: as they are).
	PreviewerError func(job preview.Job, err error) error
	InputError     func(job preview.Job, err error) error
}

// PreviewText is one object's preview as a PreviewPrinter writes it (Render's result).
type PreviewText struct {
	text     []byte
	accepted bool
	err      error
	// before is printed as is before err (the violations of a non-structural schema).
	before []byte
}

// PreviewItem is one object's preview in the json and yaml formats.
type PreviewItem struct {
	// Source names the file and document the object came from.
	Source string `json:"source"`
	preview.PreviewResult
}

// PreviewReport is the whole json or yaml output of a PreviewPrinter: the items, then the
// counts (written as the objects are previewed).
type PreviewReport struct {
	Items    []PreviewItem `json:"items"`
	Accepted int           `json:"accepted"`
	Rejected int           `json:"rejected"`
	// Skipped counts the documents of the input that no CustomResourceDefinition defines.
	Skipped int `json:"skipped"`
	// KubernetesVersion is the version the objects were judged as ("1.37").
	KubernetesVersion string `json:"kubernetesVersion"`
}

// PreviewPrinter writes the previews of a preview.Stream: Render formats each outcome (on the
// stream's workers, in parallel), Write writes them in the input's order as they come,
// counting the verdicts, and Finish writes the counts.
type PreviewPrinter struct {
	o PreviewPrinterOptions

	started  bool
	accepted int
	rejected int
}

// NewPreviewPrinter is the printer of the previews of one run.
func NewPreviewPrinter(o PreviewPrinterOptions) *PreviewPrinter { return &PreviewPrinter{o: o} }

// Accepted and Rejected count the results written so far; Total is their sum.
func (s *PreviewPrinter) Accepted() int { return s.accepted }
func (s *PreviewPrinter) Rejected() int { return s.rejected }
func (s *PreviewPrinter) Total() int    { return s.accepted + s.rejected }

// Write writes one result, in input order (called one at a time: preview.Stream's deliver).
func (s *PreviewPrinter) Write(r PreviewText) error {
	if r.err != nil {
		if len(r.before) > 0 {
			_, _ = s.o.Out.Write(r.before)
		}
		return r.err
	}
	if r.accepted {
		s.accepted++
	} else {
		s.rejected++
	}
	return s.write(r.text)
}

func word(f func(preview.Job, error) error, job preview.Job, err error) error {
	if f == nil {
		return err
	}
	return f(job, err)
}

// Render formats one outcome (preview.Stream's render: called on the worker that previewed
// it, so it may run concurrently with itself, never with Write's writing of the same object).
func (s *PreviewPrinter) Render(o preview.Outcome) PreviewText {
	job, err := o.Job, o.Err
	if err != nil {
		switch o.Step {
		case preview.StepPreviewer:
			return PreviewText{err: word(s.o.PreviewerError, job, err)}
		case preview.StepOld:
			return PreviewText{err: err}
		}
		var nse *preview.NonStructuralError
		var before bytes.Buffer
		if errors.As(err, &nse) && !s.o.Update {
			// The violations go out before the error, as explain prints them.
			if perr := PrintViolations(&before, nse.Violations, s.o.NoHeaders); perr != nil {
				return PreviewText{err: perr}
			}
		}
		return PreviewText{err: word(s.o.InputError, job, err), before: before.Bytes()}
	}
	text, err := s.format(PreviewItem{Source: job.Source, PreviewResult: *o.Result}, job.JSON)
	return PreviewText{text: text, accepted: o.Result.Accepted(), err: err}
}

// format renders one item (in a worker); nothing when OnlyRejected and it was accepted.
func (s *PreviewPrinter) format(item PreviewItem, input []byte) ([]byte, error) {
	if s.o.OnlyRejected && item.Accepted() {
		return nil, nil
	}
	var b bytes.Buffer
	switch s.o.Format {
	case "json":
		js, err := json.MarshalIndent(item, "    ", "  ")
		if err != nil {
			return nil, err
		}
		b.WriteString("    ")
		b.Write(js)
	case "yaml":
		if err := writeYAMLItem(&b, item); err != nil {
			return nil, err
		}
	case "name":
		b.WriteString(nameLine(item))
	default:
		if err := Preview(&b, item.Source, item.PreviewResult, input, s.o.Diff, s.o.Color); err != nil {
			return nil, err
		}
	}
	return b.Bytes(), nil
}

// nameLine is the "name" format's line: verdict, object (kubectl's kind.group/name), counts,
// source.
func nameLine(item PreviewItem) string {
	r := item.PreviewResult
	gv, _ := schema.ParseGroupVersion(r.APIVersion)
	name := r.Name
	if name == "" {
		name = "(no name)"
	}
	obj := strings.ToLower(r.Kind) + "." + gv.Group + "/" + name
	if r.Namespace != "" {
		obj += " -n " + r.Namespace
	}
	return fmt.Sprintf("%s %s errors=%d warnings=%d pruned=%d defaulted=%d source=%q\n",
		r.Verdict, obj, len(r.Errors), len(r.Warnings), len(r.Pruned)+len(r.PrunedOnConversion), len(r.Defaulted), item.Source)
}

func (s *PreviewPrinter) write(text []byte) error {
	if len(text) == 0 {
		return nil
	}
	switch s.o.Format {
	case "json":
		if !s.started {
			if _, err := io.WriteString(s.o.Out, "{\n  \"items\": [\n"); err != nil {
				return err
			}
		} else if _, err := io.WriteString(s.o.Out, ",\n"); err != nil {
			return err
		}
	case "yaml":
		if !s.started {
			if _, err := io.WriteString(s.o.Out, "items:\n"); err != nil {
				return err
			}
		}
	}
	s.started = true
	_, err := s.o.Out.Write(text)
	return err
}

// Finish writes the counts (skipped: the documents no CRD defines) and the version judged as.
func (s *PreviewPrinter) Finish(skipped int, kubernetesVersion string) error {
	accepted, rejected := s.accepted, s.rejected
	var err error
	switch s.o.Format {
	case "json":
		head := "\n  ],\n"
		if !s.started {
			head = "{\n  \"items\": [],\n"
		}
		_, err = fmt.Fprintf(s.o.Out, "%s  \"accepted\": %d,\n  \"rejected\": %d,\n  \"skipped\": %d,\n  \"kubernetesVersion\": %q\n}\n", head, accepted, rejected, skipped, kubernetesVersion)
	case "yaml":
		head := ""
		if !s.started {
			head = "items: []\n"
		}
		_, err = fmt.Fprintf(s.o.Out, "%saccepted: %d\nrejected: %d\nskipped: %d\nkubernetesVersion: %q\n", head, accepted, rejected, skipped, kubernetesVersion)
	case "name":
		// One line per object on Out; the counts go to ErrOut.
		_, err = fmt.Fprintf(s.o.ErrOut, "%s: %d accepted, %d rejected\n", Plural(accepted+rejected, "object"), accepted, rejected)
	default:
		_, err = fmt.Fprintf(s.o.Out, "%s: %d accepted, %d rejected\n", Plural(accepted+rejected, "object"), accepted, rejected)
	}
	return err
}
