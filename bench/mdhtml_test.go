package bench

import "testing"

// TestMdHTMLEmptyCells: a Markdown row's empty cells, the last one too
// (the ratio's "by rep" column of a run without pairs), are HTML cells:
// the row keeps its header's columns.
func TestMdHTMLEmptyCells(t *testing.T) {
	got := mdHTML("| arm | ratio | by rep |\n| --- | --- | --- |\n| uring | 0.74 |  |\n|  | 1.0 | x |\n")
	want := "<table><tr><th>arm</th><th>ratio</th><th>by rep</th></tr>\n" +
		"<tr><td>uring</td><td>0.74</td><td></td></tr>\n" +
		"<tr><td></td><td>1.0</td><td>x</td></tr>\n</table>\n"
	if got != want {
		t.Errorf("mdHTML:\n%s\nwant:\n%s", got, want)
	}
}
