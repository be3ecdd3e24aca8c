// Command democluster starts the test control plane (kube-apiserver + etcd, as the tests do),
// prints the path of an admin kubeconfig and waits for Ctrl-C. It is how the cluster examples
// of docs/ were captured:
//
//	go run ./hack/democluster          # prints e.g. /tmp/crdver-testenv-123/kubeconfig
//	export KUBECONFIG=/tmp/crdver-testenv-123/kubeconfig
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/crdver/kubectl-crdver/internal/testenv"
)

func main() {
	env, err := testenv.Start(testenv.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, "democluster:", err)
		os.Exit(1)
	}
	defer env.Stop()
	fmt.Println(env.Kubeconfig)
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	<-sig
}
