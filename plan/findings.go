package plan

// findings.go: a plan of a million objects keeps its memory whatever it finds. The findings
// an item lists are the first Options.MaxFindings in list order (Objects.Findings; the others
// are counted in Objects.Omitted); what the verdict, its reasons and the runbook's counts are
// made of is a tally of every finding, listed or not, kept as they are made (objectTally): per
// kind of finding, how many objects, the first few names, the paths, the first error.

import (
	"fmt"
	"slices"
	"strings"
)

// DefaultMaxFindings is how many findings an item lists when Options.MaxFindings is 0: enough
// for every object of most CRDs, and a page of examples for the largest (the counts, the
// verdict and the runbook's steps are of all of them).
const DefaultMaxFindings = 1000

// maxTallyPaths bounds the distinct paths a kind's tally keeps (a path with a list index per
// item could otherwise grow with the objects).
const maxTallyPaths = 100

// objectTally is what the objects' findings add up to (see above).
type objectTally struct {
	kinds map[Kind]*kindTally
	// lossy counts the objects with a data-loss or an unknown finding (the runbook's
	// convert-objects step).
	lossy int64
	// ownersUnknown tallies the objects whose rewrite may drop field managers, which plan
	// cannot tell (ManagersLost.Unknown: a conversion webhook's answer is needed).
	ownersUnknown kindTally
}

// kindTally is one kind's part of the tally.
type kindTally struct {
	count int64
	// names are the first namesShown objects' names, in list order.
	names []string
	// paths are the distinct paths found (the data-loss kind's pruned fields, the unknown kind's
	// possibly pruned ones, the type-mismatch kind's values), at most maxTallyPaths; more
	// says some were left out.
	paths []string
	more  bool
	// first is the first object's first error (type mismatches).
	first string
}

// add tallies one finding (its kinds as f.kinds() says).
func (t *objectTally) add(f *Finding) {
	if t.kinds == nil {
		t.kinds = map[Kind]*kindTally{}
	}
	name := objectName(f)
	kinds := f.kinds()
	if slices.Contains(kinds, KindDataLoss) || slices.Contains(kinds, KindUnknown) {
		t.lossy++
	}
	if f.ManagersLost != nil && f.ManagersLost.Unknown != "" {
		t.ownersUnknown.count++
		if len(t.ownersUnknown.names) < namesShown {
			t.ownersUnknown.names = append(t.ownersUnknown.names, name)
		}
		if t.ownersUnknown.first == "" {
			t.ownersUnknown.first = f.ManagersLost.Unknown
		}
	}
	for _, k := range kinds {
		kt := t.kinds[k]
		if kt == nil {
			kt = &kindTally{}
			t.kinds[k] = kt
		}
		kt.count++
		if len(kt.names) < namesShown {
			if k == KindOwnershipLoss { // the managers it loses with its name
				kt.names = append(kt.names, name+" ("+strings.Join(f.ManagersLost.Lost, ", ")+")")
			} else {
				kt.names = append(kt.names, name)
			}
		}
		switch k {
		case KindDataLoss:
			kt.addPaths(f.PrunedOnRead)
		case KindUnknown:
			kt.addPaths(f.PossiblyPrunedOnRead)
		case KindOwnershipLoss:
			if kt.first == "" {
				kt.first = f.ManagersLost.Because
			}
		case KindTypeMismatch:
			if kt.first == "" && len(f.TypeMismatches) > 0 {
				kt.first = f.TypeMismatches[0].Error
			}
			for _, m := range f.TypeMismatches {
				kt.addPaths([]string{trimDot(m.Path)})
			}
		}
	}
}

func (kt *kindTally) addPaths(paths []string) {
	for _, p := range paths {
		if slices.Contains(kt.paths, p) {
			continue
		}
		if len(kt.paths) >= maxTallyPaths {
			kt.more = true
			return
		}
		kt.paths = append(kt.paths, p)
	}
}

// of is kind k's tally (the zero tally when none was found).
func (t *objectTally) of(k Kind) kindTally {
	if kt := t.kinds[k]; kt != nil {
		return *kt
	}
	return kindTally{}
}

// tallyOf tallies findings: an item made without the object pass's tally (offline items,
// tests) is judged from the findings it lists.
func tallyOf(findings []Finding) *objectTally {
	t := &objectTally{}
	for i := range findings {
		t.add(&findings[i])
	}
	return t
}

// tally is the item's tally of its objects' findings: the object pass's, or one made from
// the findings listed.
func (it *Item) tally() *objectTally {
	if it.objects != nil {
		return it.objects
	}
	return tallyOf(it.Objects.Findings)
}

// CountObjects is the number of the item's objects with a finding of kind k, listed in
// Objects.Findings or not.
func (it *Item) CountObjects(k Kind) int64 { return it.tally().of(k).count }

func trimDot(p string) string {
	if len(p) > 0 && p[0] == '.' {
		return p[1:]
	}
	return p
}

// LosingObjects is the number of the item's objects with a data-loss or an unknown finding
// (fields lost on read, or possibly lost), listed in Objects.Findings or not.
func (it *Item) LosingObjects() int64 { return it.tally().lossy }

// capListOf is capList for a list of the first of total objects (the item's findings list
// at most MaxFindings): the count of those left out is of all of them.
func capListOf(s []string, total int64) []string {
	if total <= int64(len(s)) {
		return capList(s)
	}
	shown := s[:min(len(s), objectsShown):min(len(s), objectsShown)]
	return append(shown, fmt.Sprintf("… and %d more (kubectl crdver plan -o json lists the first objects with findings, not all: the counts are of all)", total-int64(len(shown))))
}

// WithFindings is the number of objects with something to report: those Findings lists and
// those it leaves out (Omitted).
func (o Objects) WithFindings() int64 { return int64(len(o.Findings)) + o.Omitted }
