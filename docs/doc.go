// Package docs is the manual of kubectl-crdver: the markdown pages in this folder. Its Go code
// is only the tests of the pages themselves: every console example of README.md and the pages
// is run and its output checked (TestExamples; make docs regenerates them), the links between
// the pages and to their headings resolve (TestDocLinks), and README's install route works from
// a clean copy (TestMakeInstallFromCleanClone).
package docs
