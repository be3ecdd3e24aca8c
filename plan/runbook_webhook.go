package plan

// runbook_webhook.go: the runbook's steps about the conversion the new CRDs rely on (decision
// table: KindConversionWebhook), before any other: nothing that reads or rewrites the stored
// objects at another version works until it does.

import (
	"fmt"
	"slices"
	"strings"

	"github.com/crdver/kubectl-crdver/webhookcheck"
)

// Runbook actions of the conversion.
const (
	// ActionDeployWebhook: the conversion webhook the new CRDs rely on is not running: a
	// person deploys the release's webhook (the documents of the release that make it, when it
	// carries them) and waits until it answers, before any other step.
	ActionDeployWebhook = "deploy-webhook"
	// ActionFixConversion: the conversion the new CRDs rely on answers but fails the API
	// server's checks, is not reachable with its configuration, or is dropped by the new CRD:
	// a person fixes the webhook or the CRDs.
	ActionFixConversion = "fix-conversion"
)

// webhook adds, first, a deploy-webhook step per webhook that is not running (its CRDs
// together) and a fix-conversion step per CRD whose conversion otherwise breaks; then, for the
// objects whose round trip through the webhook loses fields, a convert-objects step.
func (b *runbook) webhook() {
	var hooks []string
	byHook := map[string][]*crdPlan{}
	for _, p := range b.plans {
		c := p.it.ConversionCheck
		if !c.Breaks() {
			continue
		}
		if !c.NotRunning {
			b.add(RunbookStep{Phase: PhaseFix, Action: ActionFixConversion, CRDs: []string{p.next.Name}, Manual: DecisionFor(KindConversionWebhook).Manual,
				Objects: conversionObjects(c), Commands: []string{fmt.Sprintf("kubectl crdver plan -f %s", b.file)},
				Why: fmt.Sprintf("%s: %s. Until it is fixed, reads and writes of these objects at the new versions fail (or convert them to something else), and kubectl crdver upgrade refuses before its first write; no option makes it go on. Fix the release's webhook or %s's conversion in %s; the plan shows it fixed once the round trips pass",
					p.next.Name, c.Reason, p.next.Name, b.file)})
			continue
		}
		key := c.Webhook + "\x00" + c.Target
		if _, ok := byHook[key]; !ok {
			hooks = append(hooks, key)
		}
		byHook[key] = append(byHook[key], p)
	}
	for _, key := range hooks {
		b.add(b.deployStep(byHook[key]))
	}
	for _, p := range b.plans {
		c := p.it.ConversionCheck
		if c == nil {
			continue
		}
		n, ls := c.StorageLosses()
		if n == 0 {
			continue
		}
		var objs []string
		for _, l := range ls {
			objs = append(objs, fmt.Sprintf("%s (held at %s, %s): %s", l.Object, l.HeldAt, l.Direction, strings.Join(l.Fields, ", ")))
		}
		b.add(RunbookStep{Phase: PhaseFix, Action: ActionConvertObjects, CRDs: []string{p.next.Name}, Manual: DecisionFor(KindDataLoss).Manual, Objects: capList(objs),
			Why: fmt.Sprintf("%s of %s lose fields in the round trip through the conversion webhook (%s): rewriting them at %s drops those fields from etcd. Move the data to fields the webhook converts (the release's own migration guide says how), or accept the loss: kubectl crdver upgrade refuses unless --allow-data-loss; the backup below keeps it",
				objects(int(n)), p.next.Name, c.Reached, p.storage)})
	}
}

// deployStep is the step for a person that gets the webhook the plans' CRDs rely on running:
// the release's own documents of it when its files carry them, else the Service the CRDs name.
func (b *runbook) deployStep(ps []*crdPlan) RunbookStep {
	c := ps[0].it.ConversionCheck
	var crds, needs []string
	for _, p := range ps {
		crds = append(crds, p.next.Name)
		needs = append(needs, p.it.ConversionCheck.Needed...)
	}
	e, _ := webhookcheck.EndpointOf(ps[0].next)
	svcNS := ""
	if e != nil && e.Service != nil {
		svcNS = e.Service.Namespace
	}
	var cmds []string
	why := fmt.Sprintf("deploy the release's conversion webhook and wait until it answers, before any other step: %s %s %s stored objects through %s (%s), which %s. Until it answers, every read of those objects at those versions fails, and kubectl crdver upgrade stops before its first write",
		strings.Join(crds, ", "), agree(len(crds), "converts", "convert"), agree(len(crds), "its", "their"), c.Webhook, strings.Join(dedupe(needs), "; "), strings.TrimPrefix(c.Reason, "the conversion webhook the new CRD relies on ("+c.Webhook+") "))
	if w := c.Release; w != nil {
		why += fmt.Sprintf(". %s carries it: %s. Apply those documents (and what they need: namespace, service account, RBAC) before the CRDs", b.file, w.describe())
		for _, o := range w.Workloads {
			cmds = append(cmds, fmt.Sprintf("kubectl -n %s rollout status %s/%s --timeout=5m", orEmpty(o.Namespace, svcNS), strings.ToLower(o.Kind), o.Name))
		}
		for _, o := range w.Certificates {
			if o.Kind == "Certificate" {
				cmds = append(cmds, fmt.Sprintf("kubectl -n %s wait --for=condition=Ready certificate/%s --timeout=5m", orEmpty(o.Namespace, svcNS), o.Name))
			}
		}
	} else if e != nil && e.Service != nil {
		why += fmt.Sprintf(". %s does not carry it: deploy the release's operator (the conversion webhook of its version) so that Service %s/%s answers on port %d with a serving certificate for %s that the CRDs' caBundle verifies", b.file, e.Service.Namespace, e.Service.Name, e.Port, e.Name)
	}
	if e != nil && e.Service != nil {
		cmds = append(cmds, fmt.Sprintf("kubectl -n %s get service,endpointslices -l kubernetes.io/service-name=%s", e.Service.Namespace, e.Service.Name))
	}
	why += "; then run the plan again: it round-trips every stored object through the webhook"
	cmds = append(cmds, fmt.Sprintf("kubectl crdver plan -f %s", b.file))
	return RunbookStep{Phase: PhaseFix, Action: ActionDeployWebhook, CRDs: crds, Manual: DecisionFor(KindConversionWebhook).Manual, Commands: cmds, Why: why}
}

// conversionObjects are the objects a broken conversion fails, with the first error of each.
func conversionObjects(c *ConversionCheck) []string {
	var out []string
	if rt := c.RoundTrip; rt != nil {
		for _, e := range rt.Failed {
			out = append(out, e.String())
		}
	}
	if d := c.Differ; d != nil {
		for _, l := range d.Losses {
			out = append(out, fmt.Sprintf("%s (%s): %s", l.Object, l.Direction, strings.Join(l.Fields, ", ")))
		}
	}
	return capList(out)
}

func dedupe(s []string) []string {
	var out []string
	for _, x := range s {
		if !slices.Contains(out, x) {
			out = append(out, x)
		}
	}
	return out
}
