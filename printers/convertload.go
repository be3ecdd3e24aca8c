package printers

// convertload.go: the report of `convert --load` for people (a row per request size) and as
// Markdown (a pull request comment or a CI summary).

import (
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/crdver/kubectl-crdver/convert"
)

func printLoadReport(w io.Writer, r *convert.LoadReport, noHeaders bool) error {
	var b strings.Builder
	fmt.Fprintf(&b, "CRD:        %s\n", r.CRD)
	fmt.Fprintf(&b, "Webhook:    %s\n", r.Webhook)
	fmt.Fprintf(&b, "Converted:  to %s, ConversionReview %s, one request at a time\n", r.To, r.ReviewVersion)
	fmt.Fprintf(&b, "Objects:    %d, %d bytes each on average (largest %d)\n", r.Objects, r.ObjectBytes, r.LargestObjectBytes)
	for _, n := range r.Notes {
		fmt.Fprintf(&b, "note: %s\n", n)
	}
	b.WriteString("\n")
	if _, err := io.WriteString(w, b.String()); err != nil {
		return err
	}
	t := &Table{Header: []string{"objects", "as in", "requests", "p50", "p99", "max", "budget", "verdict"}}
	for _, s := range r.Sizes {
		verdict := s.Verdict
		if s.Failed > 0 {
			verdict += fmt.Sprintf(" (%d answer(s) wrong)", s.Failed)
		}
		if s.Requests == 0 {
			t.Add(strconv.Itoa(s.Objects), s.What, "0", "-", "-", "-", budget(s.BudgetMs), verdict)
			continue
		}
		t.Add(strconv.Itoa(s.Objects), s.What, strconv.Itoa(s.Requests), ms(s.Latency.P50), ms(s.Latency.P99), ms(s.Latency.Max), budget(s.BudgetMs), verdict)
	}
	if err := t.Print(w, noHeaders); err != nil {
		return err
	}
	b.Reset()
	fmt.Fprintf(&b, "\nbudget: the CRD GA scale targets (KEP-95), judged on p99; %s\n", loadSummary(r))
	if len(r.Findings) > 0 {
		fmt.Fprintf(&b, "\n%d finding(s):\n", len(r.Findings))
		if _, err := io.WriteString(w, b.String()); err != nil {
			return err
		}
		ft := &Table{Header: []string{"object", "direction", "check", "path", "detail"}}
		for _, f := range r.Findings {
			check := f.Check
			if f.Severity == convert.SeverityWarning {
				check += " (warning)"
			}
			ft.Add(f.Object, f.Direction, check, Dash(f.Path), f.Detail)
		}
		return ft.Print(w, noHeaders)
	}
	_, err := io.WriteString(w, b.String())
	return err
}

// loadSummary is the verdict of the run in words.
func loadSummary(r *convert.LoadReport) string {
	var over []string
	for _, s := range r.Sizes {
		if s.Verdict == convert.VerdictOver || s.Verdict == convert.VerdictFailed {
			over = append(over, strconv.Itoa(s.Objects))
		}
	}
	switch {
	case r.Unreachable != "":
		return "the webhook could not be reached: " + r.Unreachable
	case len(over) > 0:
		return "the webhook does not meet it at " + strings.Join(over, ", ") + " object(s) per request"
	}
	return "the webhook meets it at every size measured"
}

// ConvertLoadMarkdown is the report as Markdown.
func ConvertLoadMarkdown(r *convert.LoadReport) string {
	var b strings.Builder
	fmt.Fprintf(&b, "### %s: conversion webhook latency against the API server's budget\n\n", r.CRD)
	fmt.Fprintf(&b, "To `%s`, ConversionReview `%s`; %d object(s) of %d bytes on average. Budget: the CRD GA scale targets (KEP-95), judged on p99.\n\n", r.To, r.ReviewVersion, r.Objects, r.ObjectBytes)
	b.WriteString("| Objects | As in | Requests | p50 | p99 | Budget | Verdict |\n|---|---|---|---|---|---|---|\n")
	for _, s := range r.Sizes {
		verdict := s.Verdict
		if s.Verdict == convert.VerdictOver || s.Verdict == convert.VerdictFailed {
			verdict = "**" + verdict + "**"
		}
		if s.Requests == 0 {
			fmt.Fprintf(&b, "| %d | %s | 0 | | | %s | %s |\n", s.Objects, s.What, budget(s.BudgetMs), verdict)
			continue
		}
		fmt.Fprintf(&b, "| %d | %s | %d | %s | %s | %s | %s |\n", s.Objects, s.What, s.Requests, ms(s.Latency.P50), ms(s.Latency.P99), budget(s.BudgetMs), verdict)
	}
	fmt.Fprintf(&b, "\n%s.\n", strings.ToUpper(loadSummary(r)[:1])+loadSummary(r)[1:])
	return b.String()
}

// budget prints a budget as a duration: 50ms, 1s, 6s.
func budget(msec float64) string { return (time.Duration(msec * float64(time.Millisecond))).String() }
