package printers

import "strings"

const (
	ansiRed   = "\x1b[31m"
	ansiGreen = "\x1b[32m"
	ansiCyan  = "\x1b[36m"
	ansiReset = "\x1b[0m"
)

// ColorDiff colours a unified diff when color: removed lines red, added lines green, hunk
// headers cyan.
func ColorDiff(diff string, color bool) string {
	if !color {
		return diff
	}
	var b strings.Builder
	for _, line := range strings.SplitAfter(diff, "\n") {
		body := strings.TrimSuffix(line, "\n")
		nl := line[len(body):]
		switch {
		case body == "":
			b.WriteString(line)
			continue
		case strings.HasPrefix(body, "---") || strings.HasPrefix(body, "+++"):
			b.WriteString(line)
			continue
		case strings.HasPrefix(body, "-"):
			b.WriteString(ansiRed)
		case strings.HasPrefix(body, "+"):
			b.WriteString(ansiGreen)
		case strings.HasPrefix(body, "@@"):
			b.WriteString(ansiCyan)
		default:
			b.WriteString(line)
			continue
		}
		b.WriteString(body + ansiReset + nl)
	}
	return b.String()
}
