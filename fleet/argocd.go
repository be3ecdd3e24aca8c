package fleet

import (
	"fmt"
	"regexp"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// DefaultWaveLabel is the label of the Applications an ApplicationSet generates that names
// their cluster, which the RollingSync steps select on: the ApplicationSet's template sets it
// (labels: {crdver.io/cluster: '{{.name}}'} with the cluster generator).
const DefaultWaveLabel = "crdver.io/cluster"

// ArgoCDStrategy is an Argo CD ApplicationSet's spec.strategy that rolls the waves out: one
// RollingSync step per wave, selecting the Applications whose cluster label names a cluster of
// the wave. An Application no step selects is left out of the rolling sync (Argo CD syncs it
// only by hand): the clusters held back.
type ArgoCDStrategy struct {
	Type        string      `json:"type"`
	RollingSync RollingSync `json:"rollingSync"`
}

// RollingSync is the strategy's steps.
type RollingSync struct {
	Steps []RollingSyncStep `json:"steps"`
}

// RollingSyncStep selects the Applications of one wave.
type RollingSyncStep struct {
	MatchExpressions []MatchExpression `json:"matchExpressions"`
}

// MatchExpression is a label selector requirement, as Argo CD's steps take it.
type MatchExpression struct {
	Key      string   `json:"key"`
	Operator string   `json:"operator"`
	Values   []string `json:"values"`
}

// RollingSyncOf is the strategy of waves on the Applications' label (nil without waves).
func RollingSyncOf(waves [][]string, label string) *ArgoCDStrategy {
	if len(waves) == 0 {
		return nil
	}
	if label == "" {
		label = DefaultWaveLabel
	}
	s := &ArgoCDStrategy{Type: "RollingSync"}
	for _, w := range waves {
		s.RollingSync.Steps = append(s.RollingSync.Steps, RollingSyncStep{MatchExpressions: []MatchExpression{
			{Key: label, Operator: "In", Values: append([]string{}, w...)},
		}})
	}
	return s
}

// YAML is the strategy as the ApplicationSet's spec holds it ("strategy:" and below), in the
// order Argo CD's documentation writes it.
func (s *ArgoCDStrategy) YAML() string {
	var b strings.Builder
	fmt.Fprintf(&b, "strategy:\n  type: %s\n  rollingSync:\n    steps:\n", s.Type)
	for _, st := range s.RollingSync.Steps {
		for i, m := range st.MatchExpressions {
			lead := "          "
			if i == 0 {
				lead = "      - matchExpressions:\n          "
			}
			fmt.Fprintf(&b, "%s- key: %s\n            operator: %s\n            values:\n", lead, yamlScalar(m.Key), m.Operator)
			for _, v := range m.Values {
				fmt.Fprintf(&b, "              - %s\n", yamlScalar(v))
			}
		}
	}
	return b.String()
}

// plainScalar is a YAML scalar that reads as the string it is without quotes.
var plainScalar = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9._/-]*$`)

// yamlScalar is s as a YAML string: plain when it reads back as itself, else quoted.
func yamlScalar(s string) string {
	switch strings.ToLower(s) {
	case "true", "false", "yes", "no", "on", "off", "y", "n", "null", "~":
		return strconv.Quote(s)
	}
	if plainScalar.MatchString(s) {
		return s
	}
	return strconv.Quote(s)
}

// BadLabelValues are the cluster names of the waves that a label cannot hold (longer than 63
// characters, or characters other than letters, digits, '-', '_' and '.'): an Application's
// label cannot name them, so the steps cannot select them.
func BadLabelValues(waves [][]string) []string {
	var bad []string
	for _, w := range waves {
		for _, n := range w {
			if len(validation.IsValidLabelValue(n)) > 0 {
				bad = append(bad, n)
			}
		}
	}
	return bad
}
