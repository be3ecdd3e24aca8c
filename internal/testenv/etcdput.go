package testenv

import (
	"context"
	"time"
)

// PutStoredObject writes value (JSON) under /registry/group/plural/[ns/]name straight into
// etcd, bypassing the API server's validation: the way to recreate objects that older API
// servers accepted and today's reject on create (a v1beta1-era CRD with
// preserveUnknownFields: true and a non-structural schema, say). The API server picks the
// object up through its watch.
func (e *Env) PutStoredObject(ctx context.Context, group, plural, ns, name string, value []byte) error {
	cli, err := e.EtcdClient()
	if err != nil {
		return err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	_, err = cli.Put(ctx, StoredKey(group, plural, ns, name), string(value))
	return err
}
