package plan

import (
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"strings"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"

	crdinfo "github.com/crdver/kubectl-crdver/crd"
	"github.com/crdver/kubectl-crdver/explain"
)

// schemaChanges compares, for every version both CRDs have, the live schema with the new one
// (the field trees explain builds), and the live schema of the old storage version and of every
// removed version still in storedVersions with the new storage version's schema (objects
// encoded at those versions are read and rewritten at it). Each change has an effect: lossy
// (objects holding the field lose it), stricter (new objects and changes are held to stricter
// rules) or compatible.
func schemaChanges(live, next *apiextensionsv1.CustomResourceDefinition) ([]SchemaChange, []string, error) {
	out := []SchemaChange{}
	var notes []string
	for _, v := range crdinfo.VersionNames(next) {
		if _, err := crdinfo.Lookup(live, v); err != nil {
			continue
		}
		out = append(out, compareVersions(live, v, next, v)...)
	}
	to := crdinfo.StorageVersion(next)
	var froms []string
	if s := crdinfo.StorageVersion(live); s != "" && s != to {
		froms = append(froms, s)
	}
	for _, v := range live.Status.StoredVersions {
		if _, err := crdinfo.Lookup(next, v); err != nil && v != to && !slices.Contains(froms, v) {
			froms = append(froms, v)
		}
	}
	if _, err := crdinfo.Lookup(next, to); err == nil {
		for _, from := range froms {
			if _, err := crdinfo.Lookup(live, from); err != nil {
				continue
			}
			changes := compareVersions(live, from, next, to)
			for i := range changes {
				changes[i].From = from
			}
			out = append(out, changes...)
			if len(changes) > 0 && strategyOf(next) == apiextensionsv1.WebhookConverter {
				notes = append(notes, fmt.Sprintf("schema changes %s → %s: the new CRD converts with a webhook, which decides what objects encoded at %s keep at %s (fields it does not carry over are pruned)", from, to, from, to))
			}
		}
	}
	if live.Spec.PreserveUnknownFields && !next.Spec.PreserveUnknownFields {
		out = append(out, SchemaChange{Path: "", Change: "spec.preserveUnknownFields true → false: unknown fields are pruned from now on", Breaking: true, Effect: EffectLossy})
	}
	return out, notes, nil
}

// compareVersions compares live's schema of version from with next's schema of version to.
func compareVersions(live *apiextensionsv1.CustomResourceDefinition, from string, next *apiextensionsv1.CustomResourceDefinition, to string) []SchemaChange {
	a, errA := fieldsOf(live, from)
	b, errB := fieldsOf(next, to)
	if errA != nil || errB != nil {
		switch {
		case errA != nil && errB == nil:
			return []SchemaChange{{Version: to, Path: "", Change: "schema added", Breaking: true, Effect: EffectLossy}}
		case errA == nil && errB != nil:
			return []SchemaChange{{Version: to, Path: "", Change: "schema removed (objects are no longer validated or pruned)", Effect: EffectCompatible}}
		}
		return nil
	}
	return compareFields(to, a, b)
}

func fieldsOf(crd *apiextensionsv1.CustomResourceDefinition, v string) (map[string]explain.Field, error) {
	tree, err := explain.FieldTree(crd, v, "", true)
	if err != nil {
		return nil, err
	}
	m := map[string]explain.Field{}
	tree.Walk(func(f *explain.Field, _ int) {
		c := *f
		c.Fields = nil
		m[c.Path] = c
	})
	return m, nil
}

func sortedPaths(m map[string]explain.Field) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func parent(p string) string {
	if i := strings.LastIndexByte(p, '.'); i >= 0 {
		return p[:i]
	}
	return ""
}

// compareFields lists the changes from a to b of one version. Only the outermost added or
// removed field is listed: its children come and go with it.
func compareFields(v string, a, b map[string]explain.Field) []SchemaChange {
	var out []SchemaChange
	add := func(path, change, effect string) {
		out = append(out, SchemaChange{Version: v, Path: path, Change: change, Breaking: effect != EffectCompatible, Effect: effect})
	}
	for _, p := range sortedPaths(b) {
		if _, ok := a[p]; ok || p == "" {
			continue
		}
		if _, parentKnown := a[parent(p)]; !parentKnown && parent(p) != "" {
			continue
		}
		f := b[p]
		if f.Required {
			add(p, fmt.Sprintf("added, required (%s)", f.Type), EffectStricter)
		} else {
			add(p, fmt.Sprintf("added (%s)", f.Type), EffectCompatible)
		}
	}
	for _, p := range sortedPaths(a) {
		fa := a[p]
		fb, ok := b[p]
		if !ok {
			if _, parentKept := b[parent(p)]; p != "" && (parentKept || parent(p) == "") {
				add(p, fmt.Sprintf("removed (was %s): pruned from stored objects on read", fa.Type), EffectLossy)
			}
			continue
		}
		if fa.Type != fb.Type {
			add(p, fmt.Sprintf("type %s → %s", fa.Type, fb.Type), EffectStricter)
		}
		if !fa.Required && fb.Required {
			add(p, "now required", EffectStricter)
		} else if fa.Required && !fb.Required {
			add(p, "no longer required", EffectCompatible)
		}
		compareConstraints(fa, fb, func(change string, breaking bool) { add(p, change, effectOf(change, breaking)) })
	}
	return out
}

// lossyConstraints are the constraint changes that drop data objects hold (the rest of the
// breaking ones make rules stricter).
var lossyConstraints = []string{"no longer nullable", "x-kubernetes-preserve-unknown-fields removed"}

func effectOf(change string, breaking bool) string {
	switch {
	case !breaking:
		return EffectCompatible
	case slices.ContainsFunc(lossyConstraints, func(p string) bool { return strings.HasPrefix(change, p) }):
		return EffectLossy
	}
	return EffectStricter
}

func jsonText(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

func enumText(e []any) string {
	if len(e) == 0 {
		return "any"
	}
	parts := make([]string, len(e))
	for i, v := range e {
		parts[i] = jsonText(v)
	}
	return strings.Join(parts, "|")
}

func numText(f *float64, exclusive bool) string {
	if f == nil {
		return "none"
	}
	s := fmt.Sprint(*f)
	if exclusive {
		s += " (exclusive)"
	}
	return s
}

func intText(i *int64) string {
	if i == nil {
		return "none"
	}
	return fmt.Sprint(*i)
}

// tighter reports whether the new bound rejects values the old one accepted (lower: a
// minimum, else a maximum).
func tighter(oldV, newV *float64, oldEx, newEx, lower bool) bool {
	switch {
	case newV == nil:
		return false
	case oldV == nil:
		return true
	case *newV != *oldV:
		return (*newV > *oldV) == lower
	}
	return newEx && !oldEx
}

func toF(i *int64) *float64 {
	if i == nil {
		return nil
	}
	f := float64(*i)
	return &f
}

func compareConstraints(a, b explain.Field, add func(string, bool)) {
	// enum
	if enumText(a.Enum) != enumText(b.Enum) {
		tighter := false
		if len(b.Enum) > 0 {
			allowed := map[string]bool{}
			for _, e := range b.Enum {
				allowed[jsonText(e)] = true
			}
			if len(a.Enum) == 0 {
				tighter = true
			}
			for _, e := range a.Enum {
				if !allowed[jsonText(e)] {
					tighter = true
				}
			}
		}
		add(fmt.Sprintf("enum %s → %s", enumText(a.Enum), enumText(b.Enum)), tighter)
	}
	if a.Pattern != b.Pattern {
		add(fmt.Sprintf("pattern %q → %q", a.Pattern, b.Pattern), b.Pattern != "")
	}
	if a.Format != b.Format {
		add(fmt.Sprintf("format %q → %q", a.Format, b.Format), b.Format != "")
	}
	if numText(a.Minimum, a.ExclusiveMinimum) != numText(b.Minimum, b.ExclusiveMinimum) {
		add(fmt.Sprintf("minimum %s → %s", numText(a.Minimum, a.ExclusiveMinimum), numText(b.Minimum, b.ExclusiveMinimum)),
			tighter(a.Minimum, b.Minimum, a.ExclusiveMinimum, b.ExclusiveMinimum, true))
	}
	if numText(a.Maximum, a.ExclusiveMaximum) != numText(b.Maximum, b.ExclusiveMaximum) {
		add(fmt.Sprintf("maximum %s → %s", numText(a.Maximum, a.ExclusiveMaximum), numText(b.Maximum, b.ExclusiveMaximum)),
			tighter(a.Maximum, b.Maximum, a.ExclusiveMaximum, b.ExclusiveMaximum, false))
	}
	for _, c := range []struct {
		name       string
		old, new   *int64
		lowerBound bool
	}{
		{"minLength", a.MinLength, b.MinLength, true}, {"maxLength", a.MaxLength, b.MaxLength, false},
		{"minItems", a.MinItems, b.MinItems, true}, {"maxItems", a.MaxItems, b.MaxItems, false},
	} {
		if intText(c.old) == intText(c.new) {
			continue
		}
		add(fmt.Sprintf("%s %s → %s", c.name, intText(c.old), intText(c.new)), tighter(toF(c.old), toF(c.new), false, false, c.lowerBound))
	}
	if a.Nullable && !b.Nullable {
		add("no longer nullable: null values are dropped", true)
	} else if !a.Nullable && b.Nullable {
		add("now nullable", false)
	}
	if a.PreserveUnknownFields && !b.PreserveUnknownFields {
		add("x-kubernetes-preserve-unknown-fields removed: unknown fields below are pruned", true)
	} else if !a.PreserveUnknownFields && b.PreserveUnknownFields {
		add("x-kubernetes-preserve-unknown-fields added", false)
	}
	if a.ListType != b.ListType || strings.Join(a.ListMapKeys, ",") != strings.Join(b.ListMapKeys, ",") {
		add(fmt.Sprintf("list-type %s → %s", listText(a), listText(b)), b.ListType == "set" || b.ListType == "map")
	}
	if a.MapType != b.MapType {
		add(fmt.Sprintf("map-type %q → %q", a.MapType, b.MapType), false)
	}
	if a.EmbeddedResource != b.EmbeddedResource {
		add(fmt.Sprintf("x-kubernetes-embedded-resource %v → %v", a.EmbeddedResource, b.EmbeddedResource), true)
	}
	if strings.Join(a.Junctors, ",") != strings.Join(b.Junctors, ",") {
		add(fmt.Sprintf("junctors %s → %s", orNone(strings.Join(a.Junctors, ", ")), orNone(strings.Join(b.Junctors, ", "))), len(b.Junctors) > 0)
	}
	// defaults
	switch da, db := string(a.Default), string(b.Default); {
	case da == db:
	case da == "":
		add("default added: "+db+" (appears on read in stored objects)", false)
	case db == "":
		add("default removed (was "+da+")", true)
	default:
		add("default "+da+" → "+db, true)
	}
	// CEL rules, matched by their text
	oldRules, newRules := map[string]explain.Rule{}, map[string]explain.Rule{}
	for _, r := range a.Rules {
		oldRules[r.Rule] = r
	}
	for _, r := range b.Rules {
		newRules[r.Rule] = r
	}
	for _, r := range b.Rules {
		o, ok := oldRules[r.Rule]
		switch {
		case !ok && r.Transition:
			add("CEL transition rule added: "+r.Rule, true)
		case !ok:
			add("CEL rule added: "+r.Rule, true)
		case o.Message != r.Message || o.MessageExpression != r.MessageExpression || o.FieldPath != r.FieldPath || o.Reason != r.Reason || o.OptionalOldSelf != r.OptionalOldSelf:
			add("CEL rule changed (message, fieldPath, reason or optionalOldSelf): "+r.Rule, o.OptionalOldSelf != r.OptionalOldSelf)
		}
	}
	for _, r := range a.Rules {
		if _, ok := newRules[r.Rule]; !ok {
			add("CEL rule removed: "+r.Rule, false)
		}
	}
}

func listText(f explain.Field) string {
	if f.ListType == "" {
		return "none"
	}
	if len(f.ListMapKeys) > 0 {
		return f.ListType + " (keys: " + strings.Join(f.ListMapKeys, ",") + ")"
	}
	return f.ListType
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}
