package convert

// check.go: the response checks, in the API server's order (webhook_converter.go), whole
// request first, then each converted object. One cohesive thing (the API server's checks in
// its order), kept in one file.

import (
	"bytes"
	"errors"
	"fmt"
	"mime"
	"sort"
	"strings"

	apivalidation "k8s.io/apimachinery/pkg/api/validation"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation/field"
	kjson "sigs.k8s.io/json"
)

// check runs every check on the response of x into t. The result is aligned with
// x.items: the converted object as the API server would use it (metadata restored, pruned
// in the target schema), or nil where the API server would have failed the conversion.
// Failing items are marked; a failure of the request as a whole is kept in x.whole.
func (r *runner) check(x *exchange, t *tally) []map[string]any {
	items, to, from := x.items, x.to, x.from
	dir := from + " -> " + to
	if r.none {
		return r.convertNone(t, items, to, dir)
	}
	out := make([]map[string]any, len(items))
	failAll := func(f Finding) []map[string]any {
		f.Direction = dir
		if f.Object == "" {
			f.Object = batchName(x)
		}
		t.fail(f)
		x.whole = &f
		for _, it := range items {
			it.wholeFailed = true
		}
		return out
	}
	rev, whole := r.checkRequest(x, t)
	if whole != nil {
		return failAll(*whole)
	}
	conv := rev.Response.ConvertedObjects
	if len(conv) != len(items) {
		return failAll(Finding{Check: CheckObjectCount, Detail: fmt.Sprintf("returned %d objects, expected %d", len(conv), len(items))})
	}
	t.pass(CheckObjectCount)

	// Decode the converted objects and pair each with the original it belongs to: at the
	// same index, or (when the webhook reordered them) the one with the same uid or
	// namespace/name.
	objs := make([]map[string]any, len(conv))
	for i, raw := range conv {
		var m map[string]any
		if err := kjson.UnmarshalCaseSensitivePreserveInts(raw, &m); err != nil || m == nil {
			items[i].failed = true
			t.fail(Finding{Object: items[i].source, Direction: dir, Check: CheckObjectJSON, Detail: fmt.Sprintf("converted object at index %d is not a JSON object: %s", i, snippet(raw))})
			continue
		}
		t.pass(CheckObjectJSON)
		objs[i] = m
	}
	pair := make([]int, len(objs)) // converted index -> original index
	used := make([]bool, len(items))
	for i := range pair {
		pair[i] = -1
		if objs[i] != nil && sameIdentity(items[i].orig, objs[i]) {
			pair[i], used[i] = i, true
		}
	}
	reordered := false
	for i := range pair {
		if pair[i] >= 0 || objs[i] == nil {
			continue
		}
		for j := range items {
			if !used[j] && sameIdentity(items[j].orig, objs[i]) {
				pair[i], used[j], reordered = j, true, true
				break
			}
		}
	}
	for i := range pair { // what is left stays at its index (and fails name/uid checks)
		if pair[i] < 0 && !used[i] {
			pair[i], used[i] = i, true
		}
	}
	if reordered {
		var moved []string
		for i, j := range pair {
			if j >= 0 && j != i {
				moved = append(moved, fmt.Sprintf("%d→%d", j, i))
			}
		}
		t.fail(Finding{Object: batchName(x), Direction: dir, Check: CheckObjectOrder,
			Detail: fmt.Sprintf("converted objects are not in the order they were sent (moved: %s); the API server pairs them by index and fails the conversion", strings.Join(moved, ", "))})
		for i, j := range pair {
			if j >= 0 && j != i {
				items[j].failed = true
			}
		}
	} else {
		t.pass(CheckObjectOrder)
	}
	for i, m := range objs {
		j := pair[i]
		if m == nil || j < 0 {
			continue
		}
		items[j].convRaw = conv[i]
		out[j] = r.checkObject(t, items[j], m, to, dir)
	}
	return out
}

// checkRequest runs the checks of the request as a whole, in the API server's order, into
// t, and returns the decoded review, or the finding that fails the whole request.
func (r *runner) checkRequest(x *exchange, t *tally) (*reviewResponse, *Finding) {
	dir := x.from + " -> " + x.to
	if x.buildErr != nil {
		return nil, &Finding{Check: CheckResponseJSON, Detail: "building the request: " + x.buildErr.Error()}
	}
	uid, resp := x.uid, x.resp
	if x.err != nil {
		var te *TransportError
		if errors.As(x.err, &te) && te.Timeout {
			t.pass(CheckConnection)
			return nil, &Finding{Check: CheckTimeout, Detail: x.err.Error()}
		}
		return nil, &Finding{Check: CheckConnection, Detail: x.err.Error()}
	}
	t.pass(CheckConnection)
	t.pass(CheckTimeout)

	if resp.StatusCode != 200 {
		return nil, &Finding{Check: CheckHTTPStatus, Detail: fmt.Sprintf("HTTP %d: %s", resp.StatusCode, snippet(resp.Body))}
	}
	t.pass(CheckHTTPStatus)
	switch mt, _, err := mime.ParseMediaType(resp.ContentType); {
	case resp.ContentType != "" && err != nil:
		// client-go's transformResponse fails on a Content-Type it cannot parse.
		return nil, &Finding{Check: CheckContentType, Detail: fmt.Sprintf("Content-Type %q cannot be parsed (%v): the API server's client fails the request", resp.ContentType, err)}
	case mt != "application/json":
		// The API server's webhook client (k8s.io/apiserver/pkg/util/webhook.NewClientManager)
		// registers its JSON codec with no media type, so client-go decodes the body as JSON
		// whatever the Content-Type says: a warning.
		t.fail(Finding{Object: batchName(x), Direction: dir, Check: CheckContentType,
			Detail: fmt.Sprintf("Content-Type %q: a ConversionReview response should be application/json (the API server's client decodes it as JSON anyway)", resp.ContentType)})
	default:
		t.pass(CheckContentType)
	}
	rev := &reviewResponse{}
	if err := kjson.UnmarshalCaseSensitivePreserveInts(resp.Body, rev); err != nil {
		return nil, &Finding{Check: CheckResponseJSON, Detail: fmt.Sprintf("malformed response: %v: %s", err, snippet(resp.Body))}
	}
	t.pass(CheckResponseJSON)
	wantAPIVersion := "apiextensions.k8s.io/" + r.review
	switch {
	case r.review == "v1" && (rev.APIVersion != wantAPIVersion || rev.Kind != "ConversionReview"):
		// The API server's explicit check for v1 reviews.
		return nil, &Finding{Check: CheckReviewKind, Detail: fmt.Sprintf("expected webhook response of apiextensions.k8s.io/v1, Kind=ConversionReview, got %s, Kind=%s", rev.APIVersion, rev.Kind)}
	case r.review == "v1beta1" && (rev.APIVersion != "" || rev.Kind != "") && (rev.APIVersion != wantAPIVersion || rev.Kind != "ConversionReview"):
		// v1beta1 has no explicit check, but the API server's decoder fails on any other
		// registered-or-not kind (an empty one defaults to the request's).
		return nil, &Finding{Check: CheckReviewKind, Detail: fmt.Sprintf("the API server cannot decode a %s, Kind=%s as the apiextensions.k8s.io/v1beta1 ConversionReview it asked for", rev.APIVersion, rev.Kind)}
	}
	t.pass(CheckReviewKind)
	if rev.Response == nil {
		return nil, &Finding{Check: CheckResponsePresent, Detail: "no response provided (.response is missing)"}
	}
	t.pass(CheckResponsePresent)
	if r.review == "v1" {
		if rev.Response.UID != uid {
			return nil, &Finding{Check: CheckResponseUID, Detail: fmt.Sprintf("expected response.uid=%q, got %q", uid, rev.Response.UID)}
		}
		t.pass(CheckResponseUID)
	}
	if rev.Response.Result.Status != metav1.StatusSuccess {
		msg := rev.Response.Result.Message
		if msg == "" {
			msg = fmt.Sprintf("response.result.status was %q, not \"Success\"", rev.Response.Result.Status)
		} else {
			msg = "the webhook failed the conversion: " + msg
		}
		return nil, &Finding{Check: CheckResultStatus, Detail: msg}
	}
	t.pass(CheckResultStatus)
	return rev, nil
}

// sameIdentity: converted belongs to orig when their uids match (if orig has one), or else
// their namespace and name.
func sameIdentity(orig, converted map[string]any) bool {
	om, _ := orig["metadata"].(map[string]any)
	cm, _ := converted["metadata"].(map[string]any)
	str := func(m map[string]any, k string) string { s, _ := m[k].(string); return s }
	if ou := str(om, "uid"); ou != "" {
		return ou == str(cm, "uid")
	}
	return str(om, "name") == str(cm, "name") && str(om, "namespace") == str(cm, "namespace")
}

var identityChecks = []struct {
	check string
	path  []string
}{
	{CheckKindUnchanged, []string{"kind"}},
	{CheckNameUnchanged, []string{"metadata", "name"}},
	{CheckNamespaceUnchanged, []string{"metadata", "namespace"}},
	{CheckUIDUnchanged, []string{"metadata", "uid"}},
}

// checkObject runs the per-object checks on one converted object, in the API server's
// order, and returns it as the API server would use it (nil when it would fail).
func (r *runner) checkObject(t *tally, it *item, conv map[string]any, to, dir string) map[string]any {
	fail := func(check, path, detail string) {
		it.failed = true
		t.fail(Finding{Object: it.source, Direction: dir, Check: check, Path: path, Detail: detail})
	}
	ok := true
	want := r.apiVersion(to)
	if got, _ := conv["apiVersion"].(string); got != want {
		fail(CheckAPIVersion, ".apiVersion", fmt.Sprintf("invalid groupVersion (expected %s, received %q)", want, got))
		ok = false
	} else {
		t.pass(CheckAPIVersion)
	}
	for _, c := range identityChecks {
		if e, a := nestedString(it.orig, c.path...), nestedString(conv, c.path...); e != a {
			fail(c.check, "."+strings.Join(c.path, "."), fmt.Sprintf("must be unchanged: %q became %q", e, a))
			ok = false
		} else {
			t.pass(c.check)
		}
	}
	meta, isMap := conv["metadata"].(map[string]any)
	if !isMap {
		if _, found := conv["metadata"]; !found {
			fail(CheckMetadataPresent, ".metadata", "missing metadata in converted object")
		} else {
			fail(CheckMetadataPresent, ".metadata", fmt.Sprintf("invalid metadata of type %T in converted object", conv["metadata"]))
		}
		return nil
	}
	t.pass(CheckMetadataPresent)

	// Metadata other than labels and annotations: the API server restores it from the
	// original, silently.
	origMeta, _ := it.orig["metadata"].(map[string]any)
	var changed []string
	if !metadataEqual(origMeta, meta) { // the common case allocates nothing
		keys := map[string]bool{}
		for k := range origMeta {
			keys[k] = true
		}
		for k := range meta {
			keys[k] = true
		}
		for _, k := range sortedKeys(keys) {
			if ownCheck(k) {
				continue
			}
			if !jsonEqual(origMeta[k], meta[k]) {
				changed = append(changed, k)
				t.fail(Finding{Object: it.source, Direction: dir, Check: CheckMetadataUnchanged, Path: ".metadata." + k,
					Detail: fmt.Sprintf("changed %s → %s: the API server discards changes to metadata other than labels and annotations", compact(origMeta[k]), compact(meta[k]))})
			}
		}
	}
	if len(changed) == 0 {
		t.pass(CheckMetadataUnchanged)
	}

	restored := map[string]any{}
	for k, v := range conv {
		restored[k] = v
	}
	newMeta := runtime.DeepCopyJSONValue(origMeta)
	if newMeta == nil {
		newMeta = map[string]any{}
	}
	nm := newMeta.(map[string]any)
	laOK := true
	for _, fld := range []string{"labels", "annotations"} {
		v, found := meta[fld]
		if !found || v == nil {
			delete(nm, fld)
			continue
		}
		resp, isMap := v.(map[string]any)
		if !isMap {
			fail(CheckLabelsAnnotations, ".metadata."+fld, fmt.Sprintf("invalid metadata.%s of type %T in converted object", fld, v))
			laOK = false
			continue
		}
		orig, _ := origMeta[fld].(map[string]any)
		somethingChanged := len(orig) != len(resp)
		strs := make(map[string]string, len(resp))
		bad := false
		keys := make([]string, 0, len(resp))
		for k := range resp {
			keys = append(keys, k)
		}
		if len(keys) > 1 {
			sort.Strings(keys)
		}
		for _, k := range keys {
			s, isStr := resp[k].(string)
			if !isStr {
				fail(CheckLabelsAnnotations, fmt.Sprintf(".metadata.%s[%s]", fld, k), fmt.Sprintf("metadata.%s[%s] must be a string, but is %T in converted object", fld, k, resp[k]))
				bad = true
				continue
			}
			strs[k] = s
			if orig[k] != any(s) {
				somethingChanged = true
			}
		}
		if bad {
			laOK = false
			continue
		}
		if somethingChanged {
			var errs field.ErrorList
			if fld == "labels" {
				errs = metav1validation.ValidateLabels(strs, field.NewPath("metadata", "labels"))
			} else {
				errs = apivalidation.ValidateAnnotations(strs, field.NewPath("metadata", "annotations"))
			}
			for _, e := range errs {
				fail(CheckLabelsAnnotations, ErrorPath(e.Field, e.ErrorBody()), e.ErrorBody())
				laOK = false
			}
		}
		nm[fld] = resp
	}
	if !laOK {
		ok = false
	} else {
		t.pass(CheckLabelsAnnotations)
	}
	if !ok {
		return nil
	}
	restored["metadata"] = nm
	obj, pruned := r.checkInTarget(t, it, restored, to, dir)
	it.reusable = len(changed) == 0 && pruned == 0 && !bytes.Contains(it.convRaw, []byte("null"))
	return obj
}

// ownCheck: metadata fields with checks of their own, or that may change.
func ownCheck(k string) bool {
	switch k {
	case "labels", "annotations", "name", "namespace", "uid":
		return true
	}
	return false
}

// metadataEqual compares metadata except the fields ownCheck names.
func metadataEqual(a, b map[string]any) bool {
	for k, v := range a {
		if !ownCheck(k) && !jsonEqual(v, b[k]) {
			return false
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok && !ownCheck(k) {
			return false
		}
	}
	return true
}

// checkInTarget prunes obj in the target version's schema (what is pruned is data the API
// server would lose) and validates it there.
func (r *runner) checkInTarget(t *tally, it *item, obj map[string]any, to, dir string) (map[string]any, int) {
	s := r.schemas[to]
	var defaults []defaultField
	if it.original == nil && it.given != nil {
		// The way there: what only a default of the object's own version put there, and the
		// converted object still holds at the same value, is not lost if the target drops it.
		defaults = defaultsHeld(defaultsAdded(it.given, it.orig), obj)
	}
	// No null in what the webhook sent: nothing for the null pruning to do.
	pruned := s.pruneObject(obj, it.convRaw == nil || bytes.Contains(it.convRaw, []byte("null")))
	lost := 0
	for _, p := range pruned {
		if d := defaultAt(defaults, p); d != nil {
			t.addChanges(Change{Object: it.source, Direction: dir, Path: p, Kind: DiffDefaultDropped,
				Detail: fmt.Sprintf("dropped: %s was a default of %s the input did not hold; not in the %s schema", jsonText(d.value), it.version, to)})
			continue
		}
		lost++
		it.failed = true
		t.fail(Finding{Object: it.source, Direction: dir, Check: CheckPruned, Path: p,
			Detail: fmt.Sprintf("not in the %s schema: the API server prunes it (data loss)", to)})
	}
	if lost == 0 {
		t.pass(CheckPruned)
	}
	if it.original != nil && len(pruned) == 0 && jsonEqual(obj, it.original) {
		// Back from a round trip exactly as it was sent: it is as valid as the input was, and
		// validating it again would say nothing about the conversion.
		return obj, 0
	}
	// The API server does not validate converted objects: it stores and serves them. Only a
	// client writing one back in this version is rejected, so this is a warning.
	errs := s.validate(obj)
	for _, e := range errs {
		t.fail(Finding{Object: it.source, Direction: dir, Check: CheckTargetSchema, Path: ErrorPath(e.Field, e.ErrorBody()),
			Detail: e.ErrorBody() + " (the API server serves it, but a write of it in " + to + " is rejected)"})
	}
	if len(errs) == 0 {
		t.pass(CheckTargetSchema)
	}
	return obj, len(pruned)
}

// convertNone does what the API server does for strategy None: change apiVersion, then
// prune in the target schema.
func (r *runner) convertNone(t *tally, items []*item, to, dir string) []map[string]any {
	out := make([]map[string]any, len(items))
	for i, it := range items {
		obj := runtime.DeepCopyJSON(it.orig)
		obj["apiVersion"] = r.apiVersion(to)
		out[i], _ = r.checkInTarget(t, it, obj, to, dir)
	}
	return out
}

// compareRoundTrip diffs the original with the object that came back from A → V → A: what
// is lost fails the check, what is added or normalised is reported (tally.roundTrip).
func (r *runner) compareRoundTrip(t *tally, it *item, back map[string]any) {
	if jsonEqual(it.orig, back) {
		t.pass(CheckRoundTrip)
		return
	}
	given := it.given
	if given == nil {
		given = it.orig
	}
	if t.roundTrip(it.source, it.version+" -> "+r.opts.To+" -> "+it.version, DiffFrom(given, it.orig, back)) > 0 {
		it.failed = true
	}
}

// batchName names a request in findings that concern the whole request.
func batchName(x *exchange) string {
	if len(x.items) == 1 {
		return x.items[0].source
	}
	return fmt.Sprintf("request #%d (%d objects)", x.number, len(x.items))
}
