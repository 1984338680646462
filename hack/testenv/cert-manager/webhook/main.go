// cert-manager's webhook (validation of cert-manager.io and acme.cert-manager.io objects, identity and approval
// checks of CertificateRequests) for the test control plane: cert-manager's own admission chain, resource scheme
// and serving certificate source (internal/webhook), with the real binary's flags (pkg/webhook/options), served
// on --bind-address only (127.0.0.1), which the real binary cannot do (it listens on every interface).
package main

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/signal"
	"strconv"
	"syscall"

	cmwebhook "github.com/cert-manager/cert-manager/internal/webhook"
	logf "github.com/cert-manager/cert-manager/pkg/logs"
	"github.com/cert-manager/cert-manager/pkg/util"
	cmadmission "github.com/cert-manager/cert-manager/pkg/webhook/admission"
	"github.com/cert-manager/cert-manager/pkg/webhook/options"
	"github.com/spf13/pflag"
	"k8s.io/client-go/rest"
	ciphers "k8s.io/component-base/cli/flag"
	ctrl "sigs.k8s.io/controller-runtime"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/webhook"
)

func main() {
	logf.InitLogs()
	defer logf.FlushLogs()
	ctrl.SetLogger(logf.Log)
	if err := run(); err != nil {
		logf.Log.Error(err, "cert-manager webhook failed")
		logf.FlushLogs()
		os.Exit(1)
	}
}

func run() error {
	cfg, err := options.NewWebhookConfiguration()
	if err != nil {
		return err
	}
	fs := pflag.NewFlagSet("cert-manager-webhook", pflag.ContinueOnError)
	options.AddConfigFlags(fs, cfg)
	bind := fs.String("bind-address", "127.0.0.1", "address the webhook and healthz servers listen on (the real binary has no such flag)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		return err
	}
	if err := logf.ValidateAndApply(&cfg.Logging); err != nil {
		return err
	}

	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	log := logf.FromContext(logf.NewContext(ctx, logf.Log, "webhook"))
	v := util.VersionInfo()
	log.Info("starting cert-manager webhook", "version", v.GitVersion, "go_version", v.GoVersion, "bind_address", *bind)

	// Built by cert-manager exactly as its binary builds it; only how it is served differs (below).
	srv, err := cmwebhook.NewCertManagerWebhookServer(log, *cfg)
	if err != nil {
		return err
	}
	cipherSuites, err := ciphers.TLSCipherSuites(srv.CipherSuites)
	if err != nil {
		return err
	}
	minVersion, err := ciphers.TLSVersion(srv.MinTLSVersion)
	if err != nil {
		return err
	}
	source := srv.CertificateSource
	if source == nil {
		return fmt.Errorf("no serving certificate: set --tls-cert-file/--tls-private-key-file or the --dynamic-serving-* flags")
	}
	mgr, err := ctrl.NewManager(&rest.Config{}, ctrl.Options{
		Scheme:                 srv.ResourceScheme,
		Logger:                 log,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: net.JoinHostPort(*bind, strconv.Itoa(int(cfg.HealthzPort))),
		WebhookServer: webhook.NewServer(webhook.Options{
			Host: *bind,
			Port: int(cfg.SecurePort),
			TLSOpts: []func(*tls.Config){func(c *tls.Config) {
				c.CipherSuites = cipherSuites
				c.MinVersion = minVersion
				c.GetCertificate = source.GetCertificate
			}},
		}),
	})
	if err != nil {
		return fmt.Errorf("creating the manager: %w", err)
	}
	if err := mgr.Add(source); err != nil {
		return err
	}
	// /readyz: the webhook listens and has a serving certificate (the dynamic source makes one after it has
	// created or read its CA Secret).
	if err := mgr.AddReadyzCheck("webhook", mgr.GetWebhookServer().StartedChecker()); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("certificate", func(*http.Request) error {
		if !source.Healthy() {
			return fmt.Errorf("no serving certificate yet")
		}
		return nil
	}); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", func(*http.Request) error { return nil }); err != nil {
		return err
	}
	mgr.GetWebhookServer().Register("/mutate", cmadmission.NewCustomMutationWebhook(srv.MutationWebhook))
	mgr.GetWebhookServer().Register("/validate", cmadmission.NewCustomValidationWebhook(mgr.GetScheme(), srv.ValidationWebhook))
	return mgr.Start(ctx)
}
