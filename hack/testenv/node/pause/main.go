// pause: the process that holds a pod's namespaces on the local test node, as registry.k8s.io/pause does (that
// image cannot be pulled here). It waits for SIGTERM or SIGINT and exits 0. PID 1 of its container: zombies of the
// pod's shared PID namespace would be reaped by it, but the test pods share none.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGINT, syscall.SIGTERM)
	<-stop
}
