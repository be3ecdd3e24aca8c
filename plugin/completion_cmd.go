package plugin

import (
	"io"

	"github.com/spf13/cobra"
)

// kubectlCompletionLoaders end the scripts of `kubectl crdver completion SHELL`: kubectl
// completes a plugin's words (`kubectl crdver <TAB>`) through its own completion, which runs
// kubectl_complete-crdver (make install and krew put it beside kubectl-crdver); cobra's script
// alone completes only `kubectl-crdver <TAB>`. So the script also loads kubectl's completion
// when the shell has not, and says when kubectl_complete-crdver is missing: the one-liner
// `source <(kubectl crdver completion bash)` then completes both.
var kubectlCompletionLoaders = map[string]string{
	"bash": `
# kubectl crdver <TAB>: kubectl completes its plugins through kubectl_complete-crdver, with its
# own completion (which needs the bash-completion package); load it unless this shell has.
if ! declare -F __start_kubectl >/dev/null 2>&1 && command -v kubectl >/dev/null 2>&1; then
    source <(kubectl completion bash)
fi
if ! command -v kubectl_complete-crdver >/dev/null 2>&1; then
    echo "kubectl crdver completion: kubectl_complete-crdver is not on PATH (make install links it beside kubectl-crdver): kubectl crdver <TAB> completes nothing" >&2
fi
`,
	"zsh": `
# kubectl crdver <TAB>: kubectl completes its plugins through kubectl_complete-crdver, with its
# own completion; load it unless this shell has.
if (( ! $+functions[_kubectl] )) && (( $+commands[kubectl] )); then
    source <(kubectl completion zsh)
fi
if (( ! $+commands[kubectl_complete-crdver] )); then
    echo "kubectl crdver completion: kubectl_complete-crdver is not on PATH (make install links it beside kubectl-crdver): kubectl crdver <TAB> completes nothing" >&2
fi
`,
	"fish": `
# kubectl crdver <TAB>: kubectl completes its plugins through kubectl_complete-crdver, with its
# own completion; load it unless this shell has.
if not functions -q __kubectl_perform_completion; and type -q kubectl
    kubectl completion fish | source
end
if not type -q kubectl_complete-crdver
    echo "kubectl crdver completion: kubectl_complete-crdver is not on PATH (make install links it beside kubectl-crdver): kubectl crdver <TAB> completes nothing" >&2
end
`,
}

// addCompletionCmd adds cobra's completion command, whose bash, zsh and fish scripts end with
// the loaders above.
func addCompletionCmd(root *cobra.Command, out io.Writer) {
	root.InitDefaultCompletionCmd()
	for _, c := range root.Commands() {
		if c.Name() != "completion" {
			continue
		}
		for _, shell := range c.Commands() {
			loader, ok := kubectlCompletionLoaders[shell.Name()]
			if !ok || shell.RunE == nil {
				continue
			}
			run := shell.RunE
			shell.RunE = func(cmd *cobra.Command, args []string) error {
				if err := run(cmd, args); err != nil {
					return err
				}
				_, err := io.WriteString(out, loader)
				return err
			}
			shell.Long = "The script completes both kubectl-crdver and kubectl crdver: kubectl completes its plugins\n" +
				"through kubectl_complete-crdver (make install links it beside kubectl-crdver) with its own\n" +
				"completion, which the script loads unless the shell has.\n\n" + shell.Long
		}
	}
}
