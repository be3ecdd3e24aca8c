package convert

import (
	"context"
	"encoding/json"
	"math/rand/v2"
	"regexp"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	"github.com/crdver/kubectl-crdver/internal/testenv"
	"github.com/crdver/kubectl-crdver/internal/testwebhook"
)

func objectsJSON(t *testing.T, objs []Object) string {
	t.Helper()
	var all []map[string]any
	for _, o := range objs {
		all = append(all, o.Object)
	}
	b, err := json.Marshal(all)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestGenerateDeterministic: the same seed gives the same objects; another seed others.
func TestGenerateDeterministic(t *testing.T) {
	crd := loadCRD(t, "crontab.yaml")
	gen := func(seed uint64) string {
		g, err := Generate(crd, GenerateOptions{Version: "v1beta1", Count: 20, Seed: seed})
		if err != nil {
			t.Fatal(err)
		}
		return objectsJSON(t, g.Objects)
	}
	a, b, c := gen(7), gen(7), gen(8)
	if a != b {
		t.Errorf("seed 7 gave different objects on two runs")
	}
	if a == c {
		t.Errorf("seeds 7 and 8 gave the same objects")
	}
}

// TestGenerateValidAndVaried: every generated object is valid in its version's schema (the
// API server's validator), defaults are applied, and the objects vary what conversions get
// wrong.
func TestGenerateValidAndVaried(t *testing.T) {
	crd := richCRD(t)
	g, err := Generate(crd, GenerateOptions{Version: "v1", Count: 60, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	if g.Dropped != 0 {
		t.Errorf("%d of 60 generated objects were dropped as invalid", g.Dropped)
	}
	vs, err := newVersionSchema(crd, "v1")
	if err != nil {
		t.Fatal(err)
	}
	seen := map[string]bool{}
	for _, o := range g.Objects {
		if errs := vs.validate(o.Object); len(errs) > 0 {
			t.Errorf("%s: invalid: %v", o.Source, errs)
		}
		spec, _ := o.Object["spec"].(map[string]any)
		if spec == nil {
			seen["spec omitted"] = true
			continue
		}
		if spec["replicas"] == nil {
			t.Errorf("%s: default of spec.replicas not applied: %v", o.Source, spec)
		}
		switch v := spec["endpoint"].(type) {
		case nil:
			seen["optional omitted"] = true
		case string:
			if v == "" {
				seen["empty string"] = true
			}
			for _, sep := range []string{":", "/", ",", "="} {
				if strings.Contains(v, sep) {
					seen["separator "+sep] = true
				}
			}
		}
		if l, ok := spec["ports"].([]any); ok {
			seen["list of "+map[bool]string{true: "0", false: "n"}[len(l) == 0]] = true
			if len(l) == 1 {
				seen["list of 1"] = true
			}
		}
		if m, ok := spec["selector"].(map[string]any); ok {
			if len(m) == 0 {
				seen["empty map"] = true
			} else if len(m) == 1 {
				seen["map of 1"] = true
			}
		}
		if n, ok := spec["weight"].(int64); ok && n == 0 {
			seen["zero integer"] = true
		}
		if code, ok := spec["code"].(string); ok && !strings.HasPrefix(code, "ab-") {
			t.Errorf("%s: spec.code %q does not match its pattern", o.Source, code)
		}
	}
	for _, want := range []string{"spec omitted", "optional omitted", "empty string", "separator :", "separator /", "separator ,", "separator =",
		"list of 0", "list of 1", "empty map", "map of 1", "zero integer"} {
		if !seen[want] {
			t.Errorf("no generated object has %s", want)
		}
	}
}

// TestGeneratedRoundTrip: generated objects through the live test webhook: the well-behaved
// one is lossless, the lossy one is caught.
func TestGeneratedRoundTrip(t *testing.T) {
	srv := testwebhook.StartForTest(t, testwebhook.Options{})
	crd := webhookCRD(t, srv)
	tr := transport(t, crd, TransportOptions{})
	for _, from := range []string{"v1", "v1beta1"} {
		to := map[string]string{"v1": "v1beta1", "v1beta1": "v1"}[from]
		g, err := Generate(crd, GenerateOptions{Version: from, Count: 100, Seed: 3})
		if err != nil {
			t.Fatal(err)
		}
		rep, err := Run(context.Background(), Options{CRD: crd, To: to, RoundTrip: true, Transport: tr}, g.Objects)
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range rep.Findings {
			// v1beta1 has no pattern on cronSpec, v1 does: a generated v1beta1 cronSpec may be
			// invalid in v1. That is a true finding, not a webhook bug.
			if f.Check == CheckTargetSchema && (f.Path == ".spec.cronSpec" || f.Path == ".spec.replicas") && from == "v1beta1" {
				continue
			}
			t.Errorf("well-behaved webhook, %s -> %s: %+v", from, to, f)
		}
	}
	srv.Set(testwebhook.Lossy)
	defer srv.Set(testwebhook.Good)
	g, err := Generate(crd, GenerateOptions{Version: "v1", Count: 50, Seed: 3})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := Run(context.Background(), Options{CRD: crd, To: "v1beta1", RoundTrip: true, Transport: tr}, g.Objects)
	if err != nil {
		t.Fatal(err)
	}
	lost := map[string]bool{}
	for _, f := range rep.Findings {
		if f.Check == CheckRoundTrip && f.Path == ".spec.port" && strings.HasPrefix(f.Detail, "lost: ") {
			lost[f.Object] = true
		}
	}
	withPort := 0
	for _, o := range g.Objects {
		if spec, ok := o.Object["spec"].(map[string]any); ok && spec["port"] != nil {
			withPort++
			if !lost[o.Source] {
				t.Errorf("%s has spec.port %v, which the lossy webhook drops, but no round-trip finding says it was lost", o.Source, spec["port"])
			}
		}
	}
	if withPort == 0 {
		t.Fatal("no generated object has spec.port")
	}
	if len(rep.Failed) < withPort {
		t.Errorf("%d failed objects kept, want at least %d", len(rep.Failed), withPort)
	}
}

func richCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	return testenv.LoadCRD(t, "fixtures/rich-widgets.yaml")
}

// TestFromPattern: strings generated from regular expressions match them.
func TestFromPattern(t *testing.T) {
	for _, p := range []string{
		`^ab-[0-9]{2,3}$`,
		`^(\d+|\*)(/\d+)?(\s+(\d+|\*)(/\d+)?){4}$`,
		`^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$`,
		`^(Always|Never|IfNotPresent)$`,
		`^\d+(m|Mi|Gi)?$`,
	} {
		re := regexp.MustCompile(p)
		rng := rand.New(rand.NewPCG(1, 2))
		for range 20 {
			s, ok := fromPattern(p, rng)
			if !ok || !re.MatchString(s) {
				t.Errorf("pattern %s: generated %q (ok %v)", p, s, ok)
			}
		}
	}
}
