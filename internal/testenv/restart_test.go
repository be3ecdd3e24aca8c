package testenv

import (
	"slices"
	"testing"
)

func TestWithFlags(t *testing.T) {
	args := []string{"/bin/kube-apiserver", "--etcd-servers=http://127.0.0.1:1", "--runtime-config=a/v1=false", "--feature-gatesX=1"}
	got := withFlags(args, []string{"--runtime-config=b/v1=true", "--feature-gates=G=true"})
	want := []string{"/bin/kube-apiserver", "--etcd-servers=http://127.0.0.1:1", "--runtime-config=b/v1=true", "--feature-gatesX=1", "--feature-gates=G=true"}
	if !slices.Equal(got, want) {
		t.Errorf("withFlags = %q, want %q", got, want)
	}
	if args[2] != "--runtime-config=a/v1=false" {
		t.Errorf("withFlags changed its argument: %q", args)
	}
}
