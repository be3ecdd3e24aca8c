package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// StoredObject reads one object of group/plural straight from etcd (bypassing the API server):
// its stored JSON, and the revision at which etcd last modified it. ns is "" for a
// cluster-scoped object.
func (e *Env) StoredObject(ctx context.Context, group, plural, ns, name string) (map[string]any, int64, error) {
	key := "/registry/" + group + "/" + plural + "/"
	if ns != "" {
		key += ns + "/"
	}
	resp, err := e.etcdGet(ctx, key+name)
	if err != nil {
		return nil, 0, err
	}
	if len(resp.Kvs) != 1 {
		return nil, 0, fmt.Errorf("%s%s: not in etcd", key, name)
	}
	var obj map[string]any
	if err := json.Unmarshal(resp.Kvs[0].Value, &obj); err != nil {
		return nil, 0, fmt.Errorf("%s%s: stored value is not JSON: %w", key, name, err)
	}
	return obj, resp.Kvs[0].ModRevision, nil
}

// etcdGet reads key (with opts) straight from etcd, with a client of its own and a 30 s limit.
func (e *Env) etcdGet(ctx context.Context, key string, opts ...clientv3.OpOption) (*clientv3.GetResponse, error) {
	cli, err := clientv3.New(clientv3.Config{Endpoints: []string{e.EtcdURL}, DialTimeout: 10 * time.Second})
	if err != nil {
		return nil, err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	return cli.Get(ctx, key, opts...)
}
