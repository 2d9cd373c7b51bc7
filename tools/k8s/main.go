// Command shoal-k8s is one binary holding the control-plane programs the tests start, chosen by the
// name it runs under (get_k8s.py makes a symlink per program) or by its first argument:
//
//	kube-apiserver | kube-controller-manager | kube-scheduler | etcd
//
// One binary links the shared Kubernetes packages once, which keeps the cold build and the cache
// small (the same idea as the old hyperkube). Each program runs exactly as its upstream main does.
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format, as upstream mains register it
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics, as upstream mains register them
	_ "k8s.io/component-base/metrics/prometheus/version"  // version metric, as upstream mains register it
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	_ "time/tzdata" // CronJob time zones, as upstream mains embed them
)

var cobraPrograms = map[string]func() *cobra.Command{
	"kube-apiserver":          apiserver.NewAPIServerCommand,
	"kube-controller-manager": controllermanager.NewControllerManagerCommand,
	"kube-scheduler":          func() *cobra.Command { return scheduler.NewSchedulerCommand() },
}

func main() {
	name, args := filepath.Base(os.Args[0]), os.Args[1:]
	if name == "shoal-k8s" && len(args) > 0 {
		name, args = args[0], args[1:]
	}
	if name == "etcd" {
		// etcdmain parses everything after the program name and exits by itself.
		etcdmain.Main(append([]string{"etcd"}, args...))
		return
	}
	newCommand, ok := cobraPrograms[name]
	if !ok {
		names := []string{"etcd"}
		for known := range cobraPrograms {
			names = append(names, known)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "shoal-k8s: unknown program %q; run as one of: %s\n", name, strings.Join(names, ", "))
		os.Exit(2)
	}
	command := newCommand()
	command.SetArgs(args)
	os.Exit(cli.Run(command))
}
