package printers

import (
	"bytes"
	"fmt"
	"testing"
)

// API server warnings are counted, and each distinct one printed once with its count; at most
// maxWarningLines of them, then how many more.
func TestWarningSummary(t *testing.T) {
	var w WarningCounter
	for i := 0; i < 40; i++ {
		w.HandleWarningHeader(299, "", "stable.example.com/v1beta1 CronTab is deprecated")
	}
	w.HandleWarningHeader(299, "", "unknown field \"spec.size\"")
	w.HandleWarningHeader(199, "", "not an API server warning")
	var out bytes.Buffer
	w.Summary(&out)
	want := "Warning: stable.example.com/v1beta1 CronTab is deprecated (in 40 responses)\nWarning: unknown field \"spec.size\"\n"
	if out.String() != want {
		t.Errorf("summary:\n%q\nwant:\n%q", out.String(), want)
	}
	out.Reset()
	w.Summary(&out)
	if out.Len() != 0 {
		t.Errorf("a second summary repeats the warnings: %q", out.String())
	}
	for i := 0; i < maxWarningLines+2; i++ {
		w.HandleWarningHeader(299, "", fmt.Sprintf("warning %d", i))
	}
	w.Summary(&out)
	if got := out.String(); !bytes.HasSuffix([]byte(got), []byte("Warning: and 2 more distinct warnings from the API server\n")) {
		t.Errorf("summary of many:\n%s", got)
	}
}
