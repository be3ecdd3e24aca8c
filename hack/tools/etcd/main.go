// Command etcd is the etcd server (go.etcd.io/etcd/server/v3/etcdmain), built from the
// Go module proxy so that integration tests need no prebuilt download.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() {
	etcdmain.Main(os.Args)
}
