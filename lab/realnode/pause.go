// pause: the sandbox image's one process, built here from Go (no registry is reachable, so the
// usual registry.k8s.io/pause image is not either). It holds the pod's namespaces and does
// nothing until the kubelet stops the sandbox, then exits at once.
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
