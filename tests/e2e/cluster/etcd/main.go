// Command etcd is the stock etcd server (etcdmain), built from the pinned
// go.etcd.io/etcd/server/v3 module for tests/e2e/cluster.sh.
package main

import (
	"os"

	"go.etcd.io/etcd/server/v3/etcdmain"
)

func main() { etcdmain.Main(os.Args) }
