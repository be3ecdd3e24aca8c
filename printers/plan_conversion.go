package printers

import (
	"fmt"
	"strings"

	"github.com/crdver/kubectl-crdver/plan"
	"github.com/crdver/kubectl-crdver/webhookcheck"
)

// conversionCheck prints what the conversion the new CRD relies on does to the stored objects
// (plan.ConversionCheck): why it is needed, the webhook's state, the round trips, and the
// objects it fails or that lose fields.
func (p *planPrinter) conversionCheck(it *plan.Item) error {
	c := it.ConversionCheck
	if c == nil {
		return nil
	}
	head := "  Conversion check"
	switch {
	case c.Dropped != "":
		head += fmt.Sprintf(" (the live %s, dropped: the new CRD converts with None)", c.Dropped)
	case c.Target != "":
		head += fmt.Sprintf(" (%s, asked instead of %s)", c.Target, c.Webhook)
	case c.Webhook != "":
		head += " (" + c.Webhook + ")"
	}
	fmt.Fprintf(p.w, "%s: %s\n", head, conversionStateText(c))
	for _, n := range c.Needed {
		p.line("    needed: ", n)
	}
	if c.Reached != "" {
		p.line("    reached: ", c.Reached)
	}
	for _, pr := range c.Problems {
		if pr.Severity != webhookcheck.SeverityInfo || p.wide {
			p.line("    "+pr.Severity+": ", pr.Message)
		}
	}
	if c.Reason != "" {
		p.line("    ", c.Reason)
	}
	rt := c.RoundTrip
	if rt == nil {
		rt = c.Differ
	}
	if rt == nil || len(rt.Pairs) == 0 {
		return nil
	}
	t := p.table("from", "to", "objects", "converted")
	for _, pr := range rt.Pairs {
		t.Add(pr.From, pr.To, fmt.Sprint(pr.Objects), fmt.Sprint(pr.Converted))
	}
	if err := printIndented(p.w, t, p.noHeaders); err != nil {
		return err
	}
	if rt.Requests > 0 {
		p.line("    ", fmt.Sprintf("%d requests in %.1f s (%.0f objects/s, slowest %.0f ms)", rt.Requests, rt.Seconds, rt.PerSecond, rt.SlowestMs))
	}
	if c.Sampled {
		p.line("    ", fmt.Sprintf("sampled: %d objects per stored version (the others were not round-tripped)", c.Sample))
	}
	p.objectList("fails", int(rt.FailedCount), errorTexts(rt.Failed))
	var lost []string
	for _, l := range rt.Losses {
		lost = append(lost, fmt.Sprintf("%s (held at %s, %s): %s", l.Object, l.HeldAt, l.Direction, strings.Join(l.Fields, ", ")))
	}
	verb := "loses"
	if c.Differ != nil {
		verb = "reads differently"
	}
	p.objectList(verb, int(rt.LossCount), lost)
	p.objectList("warning", int(rt.WarningCount), errorTexts(rt.Warnings))
	if rt.AddedCount > 0 {
		p.line("    ", fmt.Sprintf("%d objects come back with fields added or normalised: not a loss", rt.AddedCount))
	}
	return nil
}

// objectList prints up to findingsShown entries (all with -o wide) of count, each prefixed.
func (p *planPrinter) objectList(prefix string, count int, entries []string) {
	for i, e := range entries {
		if !p.wide && i == findingsShown {
			break
		}
		p.line("    "+prefix+": ", e)
	}
	shown := len(entries)
	if !p.wide {
		shown = min(shown, findingsShown)
	}
	if count > shown {
		p.line("    ", fmt.Sprintf("… and %d more (%s and -o json list up to 100)", count-shown, p.wideListed))
	}
}

func errorTexts(es []webhookcheck.ObjectError) []string {
	var out []string
	for _, e := range es {
		out = append(out, e.String())
	}
	return out
}

// conversionStateText is the check's state in words.
func conversionStateText(c *plan.ConversionCheck) string {
	switch c.State {
	case webhookcheck.StateAnswers:
		if c.RoundTrip != nil && c.RoundTrip.LossCount > 0 {
			return "answers; objects lose fields"
		}
		return "answers"
	case webhookcheck.StateFails:
		return "fails the API server's checks"
	case webhookcheck.StateDown:
		if c.NotRunning {
			return "not running"
		}
		return "cannot work as configured"
	case webhookcheck.StateUnreachable:
		return "not reachable"
	case webhookcheck.StateNotAsked:
		return "not asked"
	case plan.ConversionDropped:
		return "dropped: stored objects read differently"
	case plan.ConversionNone:
		return "None keeps what the webhook made"
	}
	return c.State
}
