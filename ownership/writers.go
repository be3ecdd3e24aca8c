package ownership

import (
	"fmt"
	"strings"
	"time"
)

// DescribeWriters names field managers for a message, the same way wherever one is given
// (doctor's findings, retire's problems): "manager (Operation[ subresource], N objects[, last
// TIME])", the first three, then how many more.
func DescribeWriters(ws []Writer) string {
	const shown = 3
	var out []string
	for i, w := range ws {
		if i == shown {
			out = append(out, fmt.Sprintf("and %d more", len(ws)-shown))
			break
		}
		op := w.Operation
		if w.Subresource != "" {
			op += " " + w.Subresource
		}
		last := ""
		if w.LastWrite != nil {
			last = ", last " + w.LastWrite.UTC().Format(time.RFC3339)
		}
		out = append(out, fmt.Sprintf("%s (%s, %d objects%s)", w.Manager, op, w.Objects, last))
	}
	return strings.Join(out, ", ")
}
