package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// bashCompletionStandIn is the one function of the bash-completion package that kubectl's
// bash script calls, for machines without the package (sourced only when it is missing).
const bashCompletionStandIn = `_get_comp_words_by_ref() {
  while [ $# -gt 0 ]; do
    case $1 in
      -n) shift ;;
      cur) cur=${COMP_WORDS[COMP_CWORD]} ;;
      prev) prev=${COMP_WORDS[COMP_CWORD-1]} ;;
      words) words=("${COMP_WORDS[@]}") ;;
      cword) cword=$COMP_CWORD ;;
    esac
    shift
  done
}
`

// TestCompletionOneLiner: the documented one-liner, source <(kubectl crdver completion bash),
// in a bash that has not loaded kubectl's completion, completes `kubectl crdver pl<TAB>` (kubectl
// completes its plugins through kubectl_complete-crdver, with its own completion, which the
// script loads) as well as `kubectl-crdver pl<TAB>` (cobra's script).
func TestCompletionOneLiner(t *testing.T) {
	k := kubectl(t)
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed")
	}
	setup := bashCompletionStandIn
	if _, err := os.Stat("/usr/share/bash-completion/bash_completion"); err == nil {
		setup = "source /usr/share/bash-completion/bash_completion\n"
	}
	script := setup + `source <(kubectl crdver completion bash) || exit 1
complete_words() { # the words of a command line, the last one being completed
  COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); COMP_LINE="$*"; COMP_POINT=${#COMP_LINE}; COMPREPLY=()
  local fn; fn=$(complete -p "$1" | sed -n 's/.* -F \([^ ]*\) .*/\1/p')
  [ -n "$fn" ] || { echo "no completion for $1"; return; }
  "$fn" "$1" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}" 2>/dev/null
  echo "$1: ${COMPREPLY[*]}"
}
complete_words kubectl crdver pl
complete_words kubectl-crdver pl
complete_words kubectl crdver migrate st
`
	cmd := exec.Command(bash, "-c", script)
	cmd.Dir = filepath.Join("..", "..")
	cmd.Env = append(os.Environ(), "PATH="+binDir+string(os.PathListSeparator)+filepath.Dir(k)+string(os.PathListSeparator)+"/usr/bin:/bin",
		"KUBECONFIG="+filepath.Join(binDir, "no-kubeconfig"), "HOME="+t.TempDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("bash: %v\n%s", err, out)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	want := []string{"kubectl: plan", "kubectl-crdver: plan", "kubectl: status"}
	var got []string
	for _, l := range lines {
		if strings.HasPrefix(l, "kubectl") || strings.HasPrefix(l, "no completion") {
			got = append(got, strings.TrimSpace(l))
		}
	}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Errorf("completions after source <(kubectl crdver completion bash):\n%s\nwant\n%s\n(all output:\n%s)", strings.Join(got, "\n"), strings.Join(want, "\n"), out)
	}
}
