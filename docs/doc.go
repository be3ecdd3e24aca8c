// Package docs is the manual of kubectl-crdver: the markdown pages in this folder. Its Go code
// is only the tests of the pages themselves (links between the pages and to their headings); the
// example commands of the pages are run by TestOfflineExamples in plugin/.
package docs
