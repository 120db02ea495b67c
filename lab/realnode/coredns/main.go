// The real node's cluster DNS (lab/realnode.sh): CoreDNS with only the plugins its Corefile uses.
//
// CoreDNS's own main imports every plugin of its plugin.cfg, and with them the AWS, Azure and
// Google SDKs, etcd's client and a tracer: most of its build time on a cold cache. A main that
// imports coremain and the plugins it needs is CoreDNS's documented way to choose them
// (coredns.io, "Compile Time Enabling or Disabling Plugins"). hack/tools.sh build_coredns builds
// this file in a scratch module at versions.sh's COREDNS_VERSION.
package main

import (
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/kubernetes"
)

// directives: the plugins above, in plugin.cfg's order, which is the order a query passes them.
var directives = []string{"bind", "errors", "cache", "kubernetes", "forward"}

func init() { dnsserver.Directives = directives }

func main() { coremain.Run() }
