package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"

	"github.com/crdver/kubectl-crdver/internal/testcrd"
)

// StoredAPIVersions reads the objects of group/plural straight from etcd (bypassing the API
// server) and counts them by the apiVersion they are encoded at. It also returns the last etcd
// revision at which one of those objects or their CRD was written (the largest ModRevision of
// their keys): it moves with every create or update of them, and not with the API server's own
// background writes (leases, events), which move etcd's global revision at any moment. A delete
// shows in the counts.
func (e *Env) StoredAPIVersions(ctx context.Context, group, plural string) (map[string]int, int64, error) {
	crdKey := "/registry/apiextensions.k8s.io/customresourcedefinitions/" + plural + "." + group
	got, err := e.etcdGet(ctx, clientv3.OpGet(crdKey))
	if err != nil {
		return nil, 0, err
	}
	var rev, at int64
	for _, kv := range got[0] {
		rev = max(rev, kv.ModRevision)
	}
	// The objects a page at a time (a million of them are gigabytes), all at one revision.
	cli, err := e.EtcdClient()
	if err != nil {
		return nil, 0, err
	}
	defer cli.Close()
	prefix := "/registry/" + group + "/" + plural + "/"
	out := map[string]int{}
	from := prefix
	for {
		opts := []clientv3.OpOption{clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix)), clientv3.WithLimit(10000)}
		if at != 0 {
			opts = append(opts, clientv3.WithRev(at))
		}
		cctx, cancel := context.WithTimeout(ctx, time.Minute)
		resp, err := cli.Get(cctx, from, opts...)
		cancel()
		if err != nil {
			return nil, 0, err
		}
		if at == 0 {
			at = resp.Header.Revision
		}
		for _, kv := range resp.Kvs {
			rev = max(rev, kv.ModRevision)
			var tm metav1.TypeMeta
			if err := json.Unmarshal(kv.Value, &tm); err != nil {
				return nil, 0, fmt.Errorf("%s: stored value is not JSON: %w", kv.Key, err)
			}
			out[tm.APIVersion]++
		}
		if !resp.More || len(resp.Kvs) == 0 {
			return out, rev, nil
		}
		from = string(resp.Kvs[len(resp.Kvs)-1].Key) + "\x00"
	}
}

// TwoVersionCRD is a namespaced CRD with versions v1beta1 (the storage version) and v1, both
// served with the same schema ({spec: specSchema}) and conversion None: objects written now are
// stored at v1beta1, the starting point of a storage-version migration.
func TwoVersionCRD(group, plural, kind string, specSchema apiextensionsv1.JSONSchemaProps) *apiextensionsv1.CustomResourceDefinition {
	return testcrd.New(group, kind, testcrd.Plural(plural), testcrd.Versions("v1beta1", "v1"), testcrd.Storage("v1beta1"),
		testcrd.Schema(apiextensionsv1.JSONSchemaProps{Type: "object", Properties: map[string]apiextensionsv1.JSONSchemaProps{"spec": specSchema}}))
}

// CreateObjects creates n objects of crd (namespaced) at its storage version, named
// <singular>-000, <singular>-001, …, spread over namespaces in turn, each with spec.size = i.
func (e *Env) CreateObjects(ctx context.Context, crd *apiextensionsv1.CustomResourceDefinition, namespaces []string, n int) error {
	dyn, err := dynamic.NewForConfig(e.Config)
	if err != nil {
		return err
	}
	var version string
	for _, v := range crd.Spec.Versions {
		if v.Storage {
			version = v.Name
		}
	}
	gvr := schema.GroupVersionResource{Group: crd.Spec.Group, Version: version, Resource: crd.Spec.Names.Plural}
	for i := 0; i < n; i++ {
		ns := namespaces[i%len(namespaces)]
		obj := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": crd.Spec.Group + "/" + version, "kind": crd.Spec.Names.Kind,
			"metadata": map[string]any{"name": fmt.Sprintf("%s-%03d", crd.Spec.Names.Singular, i), "namespace": ns},
			"spec":     map[string]any{"size": int64(i)},
		}}
		if _, err := dyn.Resource(gvr).Namespace(ns).Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			return fmt.Errorf("creating %s/%s: %w", ns, obj.GetName(), err)
		}
	}
	return nil
}
