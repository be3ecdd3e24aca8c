package testenv

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// EtcdClient is a client of the environment's etcd, for tests that read or write storage
// directly. Close it when done.
func (e *Env) EtcdClient() (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{Endpoints: []string{e.EtcdURL}, DialTimeout: 10 * time.Second,
		MaxCallSendMsgSize: 16 << 20, MaxCallRecvMsgSize: 64 << 20})
}

// StoredKey is the etcd key the API server keeps an object of group/plural at (ns "" for a
// cluster-scoped object).
func StoredKey(group, plural, ns, name string) string {
	key := "/registry/" + group + "/" + plural + "/"
	if ns != "" {
		key += ns + "/"
	}
	return key + name
}

// PutObjects writes n objects of group/plural straight into etcd, the way PutStoredObject
// writes one: object(i) gives the i-th object's namespace, name and stored JSON. It is how the
// scale benchmarks set up a million objects in minutes (the API server's create path would take
// hours): transactions of up to 100 puts (etcd's default limit is 128 operations), 8 of them in
// flight. The API server picks the objects up through its watch. done, when set, is called
// with the number written so far after each transaction.
func (e *Env) PutObjects(ctx context.Context, group, plural string, n int, object func(i int) (ns, name string, value []byte), done func(int64)) error {
	cli, err := e.EtcdClient()
	if err != nil {
		return err
	}
	defer cli.Close()
	const batch, workers = 100, 8
	next := make(chan int)
	var written atomic.Int64
	var once sync.Once
	var first error
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for start := range next {
				ops := make([]clientv3.Op, 0, batch)
				for i := start; i < min(start+batch, n); i++ {
					ns, name, value := object(i)
					ops = append(ops, clientv3.OpPut(StoredKey(group, plural, ns, name), string(value)))
				}
				tctx, tcancel := context.WithTimeout(ctx, time.Minute)
				_, err := cli.Txn(tctx).Then(ops...).Commit()
				tcancel()
				if err != nil {
					once.Do(func() {
						first = fmt.Errorf("writing objects %d-%d of %s.%s to etcd: %w", start, start+len(ops)-1, plural, group, err)
						cancel()
					})
					return
				}
				if k := written.Add(int64(len(ops))); done != nil {
					done(k)
				}
			}
		}()
	}
feed:
	for start := 0; start < n; start += batch {
		select {
		case next <- start:
		case <-ctx.Done():
			break feed
		}
	}
	close(next)
	wg.Wait()
	if first != nil {
		return first
	}
	return ctx.Err()
}

// Compact compacts etcd at its current revision (physically: the old revisions are gone when
// it returns), after one write so that the revision has moved past any read before the call:
// every continue token the API server handed out until now is expired. It returns the
// revision compacted at.
func (e *Env) Compact(ctx context.Context) (int64, error) {
	cli, err := e.EtcdClient()
	if err != nil {
		return 0, err
	}
	defer cli.Close()
	return compact(ctx, cli)
}

func compact(ctx context.Context, cli *clientv3.Client) (int64, error) {
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	resp, err := cli.Put(ctx, "/crdver-test/compact-marker", time.Now().String())
	if err != nil {
		return 0, fmt.Errorf("moving etcd's revision on: %w", err)
	}
	rev := resp.Header.Revision
	if _, err := cli.Compact(ctx, rev, clientv3.WithCompactPhysical()); err != nil {
		return 0, fmt.Errorf("compacting etcd at revision %d: %w", rev, err)
	}
	return rev, nil
}

// CompactEvery compacts etcd (Compact) every interval until the returned stop is called; stop
// returns how many compactions were made and the first error of one, if any.
func (e *Env) CompactEvery(interval time.Duration) (stop func() (int, error)) {
	ctx, cancel := context.WithCancel(context.Background())
	var n int
	var first error
	done := make(chan struct{})
	go func() {
		defer close(done)
		cli, err := e.EtcdClient()
		if err != nil {
			first = err
			return
		}
		defer cli.Close()
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if _, err := compact(ctx, cli); err != nil {
				if ctx.Err() == nil && first == nil {
					first = err
				}
				continue
			}
			n++
		}
	}()
	return func() (int, error) {
		cancel()
		<-done
		return n, first
	}
}

// EtcdSize is etcd's backend size in bytes (dbSize, allocated) and in use (dbSizeInUse), as
// its Status reports them.
func (e *Env) EtcdSize(ctx context.Context) (size, inUse int64, err error) {
	cli, err := e.EtcdClient()
	if err != nil {
		return 0, 0, err
	}
	defer cli.Close()
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	st, err := cli.Status(ctx, e.EtcdURL)
	if err != nil {
		return 0, 0, err
	}
	return st.DbSize, st.DbSizeInUse, nil
}
