// Command shoal-node is one binary holding the programs a kind node runs, chosen by the name it runs
// under (tools/get_images.py makes a symlink per program) or by its first argument:
//
//	kubelet | kubeadm | kubectl | kube-proxy
//
// Built by tools/get_images.py from the same pinned k8s.io/kubernetes as tools/k8s (the control
// plane), so both share Go's build cache. Each program runs exactly as its upstream main does.
package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format, as upstream mains register it
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics, as upstream mains register them
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric, as upstream mains register it
	_ "k8s.io/client-go/plugin/pkg/client/auth"           // kubectl's auth plugins, as its main imports them
	kubectl "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	kubeadm "k8s.io/kubernetes/cmd/kubeadm/app"
	kubeadmerrors "k8s.io/kubernetes/cmd/kubeadm/app/util/errors"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
	_ "time/tzdata"
)

var programs = map[string]func() int{
	"kubelet": func() int { return cli.Run(kubelet.NewKubeletCommand(context.Background())) },
	"kubeadm": func() int {
		kubeadmerrors.HandleError(kubeadm.Run())
		return 0
	},
	"kubectl": func() int {
		logs.GlogSetter(kubectl.GetLogVerbosity(os.Args)) // nolint:errcheck
		if err := cli.RunNoErrOutput(kubectl.NewDefaultKubectlCommand()); err != nil {
			kubectlutil.CheckErr(err)
		}
		return 0
	},
	"kube-proxy": func() int { return cli.Run(proxy.NewProxyCommand()) },
}

func main() {
	name := filepath.Base(os.Args[0])
	if name == "shoal-node" && len(os.Args) > 1 {
		// The upstream mains read os.Args themselves: present the program's own command line.
		name = os.Args[1]
		os.Args = append([]string{name}, os.Args[2:]...)
	}
	run, ok := programs[name]
	if !ok {
		names := make([]string, 0, len(programs))
		for known := range programs {
			names = append(names, known)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "shoal-node: unknown program %q; run as one of: %s\n", name, strings.Join(names, ", "))
		os.Exit(2)
	}
	os.Exit(run())
}
