// sim-kubelet (test-only): the kubelet endpoint of every Node the JoinGuard simulation (e2e/sim) registers, and
// the etcd members of its simulated control planes. There is no kubelet and no etcd per simulated VM, but
// KubeadmControlPlane reaches both through the workload cluster's apiserver: it port-forwards to the static pod
// `etcd-<node>` (port 2379) to read the etcd member list, status and alarms, move the leader and remove members,
// and to `kube-apiserver-<node>` (port 6443) to read the serving certificate's expiry. The apiserver sends a
// port-forward to the kubelet at the Node's address and `status.daemonEndpoints.kubeletEndpoint.Port`: the sim
// points every Node here, and this process answers the way kubelet and etcd would.
//
//   - etcd: one etcd cluster per simulated Cluster, whose members are that Cluster's control-plane Nodes (the
//     labels sim.joinguard.io/cluster-namespace and -name). kubeadm names a member after its Node, as KCP
//     assumes. Served over TLS with a certificate signed by the Cluster's etcd CA (`<cluster>-etcd`, which KCP
//     creates), client certificates verified against it as kubeadm's etcd does. MemberRemove and MoveLeader
//     are remembered; nothing else is stored.
//   - kube-apiserver: the port is forwarded to the test apiserver, which stands in for every workload cluster.
//
// Usage: sim-kubelet --kubeconfig=<admin kubeconfig> --port-file=<file> [--bind-address=127.0.0.1] [--port=0]
package main

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"flag"
	"fmt"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "admin kubeconfig of the test apiserver (reads Nodes and the etcd CA secrets)")
	bind := flag.String("bind-address", "127.0.0.1", "address to listen on")
	port := flag.Int("port", 0, "port to listen on (0: any free port)")
	portFile := flag.String("port-file", "", "file the chosen port is written to once serving")
	flag.Parse()
	log.SetFlags(log.LstdFlags | log.Lmicroseconds | log.LUTC)

	cfg, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		log.Fatalf("kubeconfig: %v", err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		log.Fatalf("client: %v", err)
	}
	server, err := url.Parse(cfg.Host)
	if err != nil {
		log.Fatalf("apiserver address %q: %v", cfg.Host, err)
	}
	apiserverAddr := server.Host

	etcd := newEtcdSim(kube)
	defer etcd.stop()
	fw := &forwarder{etcd: etcd, apiserverAddr: apiserverAddr}

	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
	// kubelet's paths: /portForward/{namespace}/{pod} and /portForward/{namespace}/{pod}/{uid}.
	mux.HandleFunc("/portForward/", func(w http.ResponseWriter, req *http.Request) {
		parts := strings.Split(strings.Trim(strings.TrimPrefix(req.URL.Path, "/portForward/"), "/"), "/")
		if len(parts) < 2 {
			http.Error(w, "want /portForward/{namespace}/{pod}", http.StatusBadRequest)
			return
		}
		uid := ""
		if len(parts) > 2 {
			uid = parts[2]
		}
		log.Printf("port-forward %s/%s from %s", parts[0], parts[1], req.RemoteAddr)
		portforward.ServePortForward(w, req, fw.forPod(parts[0]), parts[1], uid, &portforward.V4Options{}, 4*time.Hour, 30*time.Second, []string{portforward.ProtocolV1Name})
	})

	cert, err := selfSigned()
	if err != nil {
		log.Fatalf("serving certificate: %v", err)
	}
	ln, err := net.Listen("tcp", net.JoinHostPort(*bind, fmt.Sprint(*port)))
	if err != nil {
		log.Fatalf("listen: %v", err)
	}
	httpServer := &http.Server{Handler: mux, TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}, ReadHeaderTimeout: 10 * time.Second}
	chosen := ln.Addr().(*net.TCPAddr).Port
	if *portFile != "" {
		if err := os.WriteFile(*portFile+".tmp", []byte(fmt.Sprint(chosen)), 0o644); err != nil {
			log.Fatalf("port file: %v", err)
		}
		if err := os.Rename(*portFile+".tmp", *portFile); err != nil {
			log.Fatalf("port file: %v", err)
		}
	}
	log.Printf("sim-kubelet serving on https://%s (kubelet port-forward; etcd members on 2379, the test apiserver %s on 6443)", ln.Addr(), apiserverAddr)

	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		<-stop
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = httpServer.Shutdown(ctx)
	}()
	if err := httpServer.ServeTLS(ln, "", ""); err != nil && err != http.ErrServerClosed {
		log.Fatalf("serve: %v", err)
	}
	log.Printf("stopped")
}

// forwarder answers a port-forward to a static pod of a simulated control-plane Node.
type forwarder struct {
	etcd          *etcdSim
	apiserverAddr string
}

type podForwarder struct {
	*forwarder
	namespace string
}

func (f *forwarder) forPod(namespace string) portforward.PortForwarder {
	return &podForwarder{forwarder: f, namespace: namespace}
}

func (p *podForwarder) PortForward(ctx context.Context, pod string, _ string, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	if p.namespace != "kube-system" {
		return fmt.Errorf("pod %s/%s: only kube-system static pods are simulated", p.namespace, pod)
	}
	switch {
	case strings.HasPrefix(pod, "etcd-") && port == 2379:
		return p.etcd.serve(ctx, strings.TrimPrefix(pod, "etcd-"), stream)
	case strings.HasPrefix(pod, "kube-apiserver-") && port == 6443:
		return pipe(ctx, p.apiserverAddr, stream)
	default:
		return fmt.Errorf("pod %s/%s port %d: nothing listens there in the simulation", p.namespace, pod, port)
	}
}

// pipe copies between the stream and a TCP connection to addr until either side ends.
func pipe(ctx context.Context, addr string, stream io.ReadWriteCloser) error {
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(conn, stream); done <- struct{}{} }()
	go func() { _, _ = io.Copy(stream, conn); done <- struct{}{} }()
	select {
	case <-done:
	case <-ctx.Done():
	}
	return nil
}

// selfSigned: the apiserver does not verify kubelet serving certificates unless --kubelet-certificate-authority is set.
func selfSigned() (tls.Certificate, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return tls.Certificate{}, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "sim-kubelet"},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		DNSNames:     []string{"localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return tls.Certificate{}, err
	}
	return tls.Certificate{Certificate: [][]byte{der}, PrivateKey: key}, nil
}
