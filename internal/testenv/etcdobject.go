package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// StoredObject reads one object of group/plural straight from etcd (bypassing the API server):
// its stored JSON, and the revision at which etcd last modified it. ns is "" for a
// cluster-scoped object.
func (e *Env) StoredObject(ctx context.Context, group, plural, ns, name string) (map[string]any, int64, error) {
	key := StoredKey(group, plural, ns, name)
	got, err := e.etcdGet(ctx, clientv3.OpGet(key))
	if err != nil {
		return nil, 0, err
	}
	kvs := got[0]
	if len(kvs) != 1 {
		return nil, 0, fmt.Errorf("%s: not in etcd", key)
	}
	var obj map[string]any
	if err := json.Unmarshal(kvs[0].Value, &obj); err != nil {
		return nil, 0, fmt.Errorf("%s: stored value is not JSON: %w", key, err)
	}
	return obj, kvs[0].ModRevision, nil
}

// etcdGet reads the keys of the get operations straight from etcd, in one transaction (so at
// one revision), with a client of its own and a 30 s limit: the key-values of each, in order.
func (e *Env) etcdGet(ctx context.Context, gets ...clientv3.Op) ([][]*mvccpb.KeyValue, error) {
	cli, err := e.EtcdClient()
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	resp, err := cli.Txn(ctx).Then(gets...).Commit()
	if err != nil {
		return nil, err
	}
	out := make([][]*mvccpb.KeyValue, len(resp.Responses))
	for i, r := range resp.Responses {
		out[i] = r.GetResponseRange().GetKvs()
	}
	return out, nil
}
