package printers

import (
	"bytes"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// Columns are as wide as their widest line on a terminal (日本語 takes six columns), three
// blanks apart, a wrapped cell continues on the next lines with the other columns blank, a row
// with fewer cells leaves the rest empty, and no line ends in blanks.
func TestTableLayout(t *testing.T) {
	tb := &Table{Header: []string{"name", "served", "notes"}}
	tb.Add("日本語", "yes", "first line\nsecond line")
	tb.Add("v1", "no")
	tb.Add("é", "", "x")
	var b bytes.Buffer
	if err := tb.Print(&b, false); err != nil {
		t.Fatal(err)
	}
	want := "" +
		"NAME     SERVED   NOTES\n" +
		"日本語   yes      first line\n" +
		"                  second line\n" +
		"v1       no\n" +
		"é                 x\n"
	if diff := cmp.Diff(want, b.String()); diff != "" {
		t.Errorf("table (-want +got):\n%s", diff)
	}
	b.Reset()
	if err := tb.Print(&b, true); err != nil {
		t.Fatal(err)
	}
	if got := b.String(); got[:len("日本語   yes")] != "日本語   yes" {
		t.Errorf("--no-headers table starts %q", got)
	}
}

func TestDisplayWidth(t *testing.T) {
	for s, want := range map[string]int{"": 0, "v1beta1": 7, "日本語": 6, "ｆｕｌｌ": 8, "e\u0301": 1, "→…": 2, "a\u200bb": 2} {
		if got := DisplayWidth(s); got != want {
			t.Errorf("DisplayWidth(%q) = %d, want %d", s, got, want)
		}
	}
}
