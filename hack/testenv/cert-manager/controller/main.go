// cert-manager's controller for the test control plane: every controller cert-manager registers (Issuers,
// Certificates: trigger, key manager, request manager, issuing, readiness, revision manager; CertificateRequests
// with each issuer type: self-signed, CA, ACME, Vault, Venafi; ACME orders and challenges; ingress-shim) run from
// cert-manager's own controller context with its default configuration, as its binary runs them. What this main
// leaves out: leader election (one replica here), the metrics and profiling servers, and the flags the tests do
// not use. Its /livez answers on --healthz-listen-address (127.0.0.1 here).
package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/signal"
	"strings"
	"syscall"

	config "github.com/cert-manager/cert-manager/internal/apis/config/controller"
	configscheme "github.com/cert-manager/cert-manager/internal/apis/config/controller/scheme"
	defaults "github.com/cert-manager/cert-manager/internal/apis/config/controller/v1alpha1"
	configv1alpha1 "github.com/cert-manager/cert-manager/pkg/apis/config/controller/v1alpha1"
	"github.com/cert-manager/cert-manager/pkg/controller"
	"github.com/cert-manager/cert-manager/pkg/healthz"
	dnsutil "github.com/cert-manager/cert-manager/pkg/issuer/acme/dns/util"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"
	"github.com/spf13/pflag"
	"golang.org/x/sync/errgroup"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/sets"

	// Controllers and issuer types register themselves when imported, as in cert-manager's binary.
	_ "github.com/cert-manager/cert-manager/pkg/controller/acmechallenges"
	_ "github.com/cert-manager/cert-manager/pkg/controller/acmeorders"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificate-shim/ingresses"
	_ "github.com/cert-manager/cert-manager/pkg/controller/certificates/trigger"
	_ "github.com/cert-manager/cert-manager/pkg/controller/clusterissuers"
	_ "github.com/cert-manager/cert-manager/pkg/controller/issuers"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/acme"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/ca"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/selfsigned"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/vault"
	_ "github.com/cert-manager/cert-manager/pkg/issuer/venafi"
)

func main() {
	logf.InitLogs()
	defer logf.FlushLogs()
	if err := run(); err != nil {
		logf.Log.Error(err, "cert-manager controller failed")
		logf.FlushLogs()
		os.Exit(1)
	}
}

// defaultConfig is cert-manager's own default ControllerConfiguration (its v1alpha1 defaulting, converted).
func defaultConfig() (*config.ControllerConfiguration, error) {
	scheme, _, err := configscheme.NewSchemeAndCodecs()
	if err != nil {
		return nil, err
	}
	versioned := &configv1alpha1.ControllerConfiguration{}
	scheme.Default(versioned)
	cfg := &config.ControllerConfiguration{}
	if err := scheme.Convert(versioned, cfg, nil); err != nil {
		return nil, err
	}
	return cfg, nil
}

func run() error {
	cfg, err := defaultConfig()
	if err != nil {
		return err
	}
	fs := pflag.NewFlagSet("cert-manager-controller", pflag.ContinueOnError)
	fs.StringVar(&cfg.KubeConfig, "kubeconfig", cfg.KubeConfig, "path to a kubeconfig")
	fs.StringVar(&cfg.Namespace, "namespace", cfg.Namespace, "only this namespace (all when empty; ClusterIssuers are then off)")
	fs.StringVar(&cfg.ClusterResourceNamespace, "cluster-resource-namespace", cfg.ClusterResourceNamespace, "namespace of the Secrets of ClusterIssuers")
	fs.StringSliceVar(&cfg.Controllers, "controllers", cfg.Controllers, "controllers to run: * is cert-manager's default set, -name leaves one out")
	fs.IntVar(&cfg.NumberOfConcurrentWorkers, "concurrent-workers", cfg.NumberOfConcurrentWorkers, "workers per controller")
	fs.StringVar(&cfg.HealthzListenAddress, "healthz-listen-address", "127.0.0.1:9403", "address of /livez")
	logf.AddFlags(&cfg.Logging, fs)
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if err := logf.ValidateAndApply(&cfg.Logging); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx = logf.NewContext(ctx, logf.Log, "controller")
	log := logf.FromContext(ctx)
	v := util.VersionInfo()
	log.Info("starting cert-manager controller", "version", v.GitVersion, "go_version", v.GoVersion)

	factory, err := controller.NewContextFactory(ctx, contextOptions(cfg))
	if err != nil {
		return err
	}
	base, err := factory.Build()
	if err != nil {
		return err
	}
	g, ctx := errgroup.WithContext(ctx)
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", cfg.HealthzListenAddress)
	if err != nil {
		return fmt.Errorf("healthz listener: %w", err)
	}
	health := healthz.NewServer(cfg.LeaderElectionConfig.HealthzTimeout)
	g.Go(func() error { return health.Start(ctx, ln) })

	enabled := enabledControllers(cfg)
	log.Info("enabled controllers", "controllers", sets.List(enabled))
	for name, construct := range controller.Known() {
		if !enabled.Has(name) {
			continue
		}
		c, err := construct(factory)
		if err != nil {
			return fmt.Errorf("controller %s: %w", name, err)
		}
		g.Go(func() error { return c.Run(cfg.NumberOfConcurrentWorkers, ctx) })
	}
	base.SharedInformerFactory.Start(ctx.Done())
	base.KubeSharedInformerFactory.Start(ctx.Done())
	base.HTTP01ResourceMetadataInformersFactory.Start(ctx.Done())
	err = g.Wait()
	base.HTTP01ResourceMetadataInformersFactory.Shutdown()
	base.KubeSharedInformerFactory.Shutdown()
	base.SharedInformerFactory.Shutdown()
	return err
}

// enabledControllers reads --controllers: "*" is cert-manager's default set, "-name" leaves one out; a namespaced
// controller runs no cluster-scoped controller.
func enabledControllers(cfg *config.ControllerConfiguration) sets.Set[string] {
	enabled, disabled := sets.New[string](), sets.New[string]()
	for _, c := range cfg.Controllers {
		switch {
		case c == "*":
			enabled.Insert(defaults.DefaultEnabledControllers...)
		case strings.HasPrefix(c, "-"):
			disabled.Insert(strings.TrimPrefix(c, "-"))
		default:
			enabled.Insert(c)
		}
	}
	if enabled.Len() == 0 {
		enabled.Insert(defaults.DefaultEnabledControllers...)
	}
	if cfg.Namespace != "" {
		enabled.Delete(defaults.ClusterScopedControllers...)
	}
	return enabled.Difference(disabled)
}

// contextOptions turns the configuration into the controller context's options, defaults included.
func contextOptions(cfg *config.ControllerConfiguration) controller.ContextOptions {
	nameservers := cfg.ACMEDNS01Config.RecursiveNameservers
	if len(nameservers) == 0 {
		nameservers = dnsutil.RecursiveNameservers
	}
	http01 := cfg.ACMEHTTP01Config
	return controller.ContextOptions{
		Kubeconfig:         cfg.KubeConfig,
		KubernetesAPIQPS:   cfg.KubernetesAPIQPS,
		KubernetesAPIBurst: cfg.KubernetesAPIBurst,
		Namespace:          cfg.Namespace,
		IssuerOptions: controller.IssuerOptions{
			ClusterResourceNamespace:        cfg.ClusterResourceNamespace,
			ClusterIssuerAmbientCredentials: cfg.ClusterIssuerAmbientCredentials,
			IssuerAmbientCredentials:        cfg.IssuerAmbientCredentials,
		},
		ACMEOptions: controller.ACMEOptions{
			HTTP01SolverImage:                 http01.SolverImage,
			HTTP01SolverResourceRequestCPU:    resource.MustParse(http01.SolverResourceRequestCPU),
			HTTP01SolverResourceRequestMemory: resource.MustParse(http01.SolverResourceRequestMemory),
			HTTP01SolverResourceLimitsCPU:     resource.MustParse(http01.SolverResourceLimitsCPU),
			HTTP01SolverResourceLimitsMemory:  resource.MustParse(http01.SolverResourceLimitsMemory),
			ACMEHTTP01SolverRunAsNonRoot:      http01.SolverRunAsNonRoot,
			HTTP01SolverNameservers:           http01.SolverNameservers,
			HTTP01SolverExtraLabels:           http01.SolverExtraLabels,
			HTTP01SolverRuntimeClassName:      http01.SolverRuntimeClassName,
			DNS01Nameservers:                  nameservers,
			DNS01CheckRetryPeriod:             cfg.ACMEDNS01Config.CheckRetryPeriod,
			DNS01CheckAuthoritative:           !cfg.ACMEDNS01Config.RecursiveNameserversOnly,
		},
		SchedulerOptions: controller.SchedulerOptions{MaxConcurrentChallenges: cfg.MaxConcurrentChallenges},
		IngressShimOptions: controller.IngressShimOptions{
			DefaultIssuerName:                 cfg.IngressShimConfig.DefaultIssuerName,
			DefaultIssuerKind:                 cfg.IngressShimConfig.DefaultIssuerKind,
			DefaultIssuerGroup:                cfg.IngressShimConfig.DefaultIssuerGroup,
			DefaultAutoCertificateAnnotations: cfg.IngressShimConfig.DefaultAutoCertificateAnnotations,
			ExtraCertificateAnnotations:       cfg.IngressShimConfig.ExtraCertificateAnnotations,
			GatewayAPIExtraProtocols:          sets.New(cfg.GatewayAPIConfig.ExtraProtocols...),
		},
		CertificateOptions: controller.CertificateOptions{
			EnableOwnerRef:                           cfg.EnableCertificateOwnerRef,
			CopiedAnnotationPrefixes:                 cfg.CopiedAnnotationPrefixes,
			CertificateRequestMinimumBackoffDuration: cfg.CertificateRequestMinimumBackoffDuration,
			CertificateRequestMaximumBackoffDuration: cfg.CertificateRequestMaximumBackoffDuration,
		},
	}
}
