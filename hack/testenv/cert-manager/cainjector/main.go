// cert-manager's cainjector for the test control plane: cert-manager's own injectors
// (pkg/controller/cainjector: the cert-manager.io/inject-ca-from, inject-ca-from-secret and inject-apiserver-ca
// annotations on webhook configurations, APIServices and CRDs) in a controller-runtime manager set up as the
// real binary sets it up (Secrets read uncached, Lease leader election), with the few flags the tests need.
package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"

	cmscheme "github.com/cert-manager/cert-manager/pkg/client/clientset/versioned/scheme"
	"github.com/cert-manager/cert-manager/pkg/controller/cainjector"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	apiext "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	kscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
	logsapi "k8s.io/component-base/logs/api/v1"
	apireg "k8s.io/kube-aggregator/pkg/apis/apiregistration/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

func main() {
	logf.InitLogs()
	defer logf.FlushLogs()
	ctrl.SetLogger(logf.Log)
	if err := run(); err != nil {
		logf.Log.Error(err, "cert-manager cainjector failed")
		logf.FlushLogs()
		os.Exit(1)
	}
}

func run() error {
	fs := pflag.NewFlagSet("cert-manager-cainjector", pflag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "path to a kubeconfig")
	namespace := fs.String("namespace", "", "only inject into objects of this namespace (all when empty)")
	leaderElect := fs.Bool("leader-elect", true, "elect a leader on a Lease before injecting")
	leaseNamespace := fs.String("leader-election-namespace", "kube-system", "namespace of the leader election Lease")
	healthAddr := fs.String("health-probe-bind-address", "0", "address of /healthz and /readyz (0: off)")
	metricsAddr := fs.String("metrics-bind-address", "0", "address of /metrics (0: off)")
	logging := logsapi.NewLoggingConfiguration()
	logf.AddFlags(logging, fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if err := logf.ValidateAndApply(logging); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log := logf.FromContext(logf.NewContext(ctx, logf.Log, "cainjector"))
	v := util.VersionInfo()
	log.Info("starting cert-manager cainjector", "version", v.GitVersion, "go_version", v.GoVersion)

	restConfig, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		return fmt.Errorf("loading the kubeconfig: %w", err)
	}
	restConfig = util.RestConfigWithUserAgent(restConfig, "cainjector")
	scheme := runtime.NewScheme()
	utilruntime.Must(kscheme.AddToScheme(scheme))
	utilruntime.Must(cmscheme.AddToScheme(scheme))
	utilruntime.Must(apiext.AddToScheme(scheme))
	utilruntime.Must(apireg.AddToScheme(scheme))
	var namespaces map[string]cache.Config
	if *namespace != "" {
		namespaces = map[string]cache.Config{*namespace: {}}
	}
	lease, renew, retry := 60*time.Second, 40*time.Second, 15*time.Second // the real binary's defaults
	mgr, err := ctrl.NewManager(restConfig, ctrl.Options{
		Scheme: scheme,
		Cache:  cache.Options{ReaderFailOnMissingInformer: true, DefaultNamespaces: namespaces},
		// As the real binary: Secrets are read from the apiserver, never cached.
		Client:                        client.Options{Cache: &client.CacheOptions{DisableFor: []client.Object{&corev1.Secret{}}}},
		LeaderElection:                *leaderElect,
		LeaderElectionNamespace:       *leaseNamespace,
		LeaderElectionID:              "cert-manager-cainjector-leader-election",
		LeaderElectionReleaseOnCancel: true,
		LeaderElectionResourceLock:    resourcelock.LeasesResourceLock,
		LeaseDuration:                 &lease,
		RenewDeadline:                 &renew,
		RetryPeriod:                   &retry,
		Metrics:                       metricsserver.Options{BindAddress: *metricsAddr},
		HealthProbeBindAddress:        *healthAddr,
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	// Ready once the informers of the injectables have synced (the manager has started its caches).
	if err := mgr.AddReadyzCheck("informers", func(req *http.Request) error {
		if !mgr.GetCache().WaitForCacheSync(req.Context()) {
			return fmt.Errorf("caches not synced")
		}
		return nil
	}); err != nil {
		return err
	}
	// The Certificate CRD must exist before the injectors start (the test installs cert-manager's CRDs first; the
	// real binary polls for it).
	if err := cainjector.RegisterAllInjectors(ctx, mgr, cainjector.SetupOptions{
		Namespace:                    *namespace,
		EnableCertificatesDataSource: true,
		EnabledReconcilersFor: map[string]bool{
			cainjector.MutatingWebhookConfigurationName:   true,
			cainjector.ValidatingWebhookConfigurationName: true,
			cainjector.APIServiceName:                     true,
			cainjector.CustomResourceDefinitionName:       true,
		},
	}); err != nil {
		return fmt.Errorf("registering the injectors: %w", err)
	}
	return mgr.Start(ctx)
}
