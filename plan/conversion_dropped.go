package plan

// conversion_dropped.go: a new CRD that converts with None what the live CRD converts through
// a webhook. Reads of the stored objects at another version then relabel them instead of
// converting them: judged by comparing, object by object, what the live webhook makes of each
// (the object read at that version through the API server now) with what None will make of it
// (relabelled and pruned in the new CRD's schema of that version), by the one loss rule.

import (
	"context"
	"errors"
	"fmt"
	"io"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/crdver/kubectl-crdver/convert"
	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/webhookcheck"
)

// judgeDropped fills c for a new CRD without the webhook the live CRD converts through.
func judgeDropped(ctx context.Context, live, next *apiextensionsv1.CustomResourceDefinition, o ConversionOptions, c *ConversionCheck) error {
	c.Dropped = conversionText(live)
	if o.Dynamic == nil {
		c.State = webhookcheck.StateNotAsked
		c.Reason = fmt.Sprintf("the new CRD converts with strategy None what the live CRD converts through its %s: what None makes of the stored objects was not compared with it (the plan is offline)", c.Dropped)
		return nil
	}
	res := &webhookcheck.Result{Webhook: c.Dropped, Pairs: []webhookcheck.Pair{}, Failed: []webhookcheck.ObjectError{}, Losses: []webhookcheck.ObjectLoss{}}
	c.RoundTrip = nil
	chunk := o.ChunkSize
	if chunk <= 0 {
		chunk = convert.DefaultPageSize
	}
	counted := map[string]bool{}
	for _, p := range c.Pairs {
		n, err := compareNone(ctx, live, next, o, p, chunk, res)
		if err != nil {
			var le *convert.ListError
			if errors.As(err, &le) && ctx.Err() == nil {
				c.State = webhookcheck.StateNotAsked
				c.Reason = fmt.Sprintf("the new CRD converts with strategy None what the live CRD converts through its %s, which does not answer now: %v", c.Dropped, err)
				c.Differ = res
				return nil
			}
			return fmt.Errorf("%s: comparing strategy None with the live %s: %w", next.Name, c.Dropped, err)
		}
		res.Pairs = append(res.Pairs, webhookcheck.Pair{From: p.From, To: p.To, Objects: n, Converted: n})
		if !counted[p.From] {
			counted[p.From] = true
			res.Objects += int64(n)
		}
	}
	c.Differ = res
	if res.LossCount == 0 {
		c.State = ConversionNone
		c.Reason = fmt.Sprintf("the new CRD converts with strategy None what the live CRD converts through its %s: None makes of each of the %s what the webhook makes of it", c.Dropped, objects(int(res.Objects)))
		return nil
	}
	first := res.Losses[0]
	c.State = ConversionDropped
	c.Reason = fmt.Sprintf("the new CRD drops the conversion its stored objects need: the live CRD converts them through its %s, the new CRD has strategy None, which relabels them: %s of %d read differently (first: %s, %s: %s differ from what the webhook makes of it)",
		c.Dropped, objects(int(res.LossCount)), res.Objects, first.Object, first.Direction, joinFields(first.Fields))
	return nil
}

// compareNone compares, for the objects stored at p.From, what the live CRD's webhook makes of
// each at p.To (a list at p.To through the API server) with what next's None makes of it
// (convert's None conversion: relabel, prune in next's schema of p.To). The two lists go page
// by page in the same order; an object missing from the other page is read on its own.
func compareNone(ctx context.Context, live, next *apiextensionsv1.CustomResourceDefinition, o ConversionOptions, p webhookcheck.Pair, chunk int64, res *webhookcheck.Result) (int, error) {
	sel := convert.Selection{AllNamespaces: true, Limit: o.Sample, PageSize: chunk}
	from, at := convert.NewClusterSource(o.Dynamic, live, p.From, sel), convert.NewClusterSource(o.Dynamic, live, p.To, sel)
	dir := fmt.Sprintf("%s -> %s: the live webhook and None", p.From, p.To)
	n := 0
	for {
		page, err := from.Next(ctx)
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
		viaHook := map[string]map[string]any{}
		if other, err := at.Next(ctx); err == nil {
			for _, ob := range other {
				viaHook[ob.Source] = ob.Object
			}
		} else if !errors.Is(err, io.EOF) {
			return n, err
		}
		none := map[string]map[string]any{}
		if _, err := convert.Run(ctx, convert.Options{CRD: next, To: p.To, Converted: func(source string, _, converted map[string]any) { none[source] = converted }}, page); err != nil {
			return n, err
		}
		for _, ob := range page {
			n++
			hook, ok := viaHook[ob.Source]
			if !ok {
				u := unstructured.Unstructured{Object: ob.Object}
				got, err := o.Dynamic.Resource(crdinfo.GVR(live, p.To)).Namespace(u.GetNamespace()).Get(ctx, u.GetName(), metav1.GetOptions{})
				if err != nil {
					continue // gone since it was listed
				}
				hook = got.Object
			}
			relabelled, ok := none[ob.Source]
			if !ok {
				continue
			}
			var fields []string
			for _, d := range convert.Losses(content(hook), content(relabelled)) {
				fields = append(fields, d.Path)
			}
			if len(fields) == 0 {
				continue
			}
			res.LossCount++
			if len(res.Losses) < 100 {
				res.Losses = append(res.Losses, webhookcheck.ObjectLoss{Object: ob.Source, HeldAt: p.From, Direction: dir, Fields: fields})
			}
		}
	}
}

// content is an object without apiVersion and metadata: what a conversion converts.
func content(obj map[string]any) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		if k != "apiVersion" && k != "metadata" {
			out[k] = v
		}
	}
	return out
}

func joinFields(fs []string) string {
	if len(fs) > 3 {
		return fmt.Sprintf("%s and %d more", joinFields(fs[:3]), len(fs)-3)
	}
	out := ""
	for i, f := range fs {
		if i > 0 {
			out += ", "
		}
		out += f
	}
	return out
}
