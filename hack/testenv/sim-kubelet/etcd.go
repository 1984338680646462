// The simulated etcd members (test-only): what KubeadmControlPlane reads and changes through
// controlplane/kubeadm/pkg/etcd (Status, MemberList, Alarm list, MoveLeader, MemberRemove), answered from the
// simulated Cluster's control-plane Nodes. A member exists for every such Node (kubeadm adds it as the Node
// joins, and names it after the Node) unless KCP removed it; the first Node is the leader until KCP moves it.
// A learner left behind by a failed join (the simulation names it in <cluster>-sim-etcd) is a member too.
package main

import (
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"fmt"
	"hash/fnv"
	"io"
	"log"
	"math/big"
	"net"
	"sort"
	"strings"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/peer"
	"google.golang.org/grpc/status"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

const (
	labelClusterNamespace = "sim.joinguard.io/cluster-namespace"
	labelClusterName      = "sim.joinguard.io/cluster-name"
	labelControlPlane     = "node-role.kubernetes.io/control-plane"
	etcdVersion           = "3.6.16"
)

type clusterKey struct{ namespace, name string }

func (k clusterKey) String() string { return k.namespace + "/" + k.name }

type clusterState struct {
	removed map[uint64]bool
	leader  uint64
}

type etcdSim struct {
	kube     *kubernetes.Clientset
	grpc     *grpc.Server
	listener *streamListener

	mu       sync.Mutex
	clusters map[clusterKey]*clusterState
	certs    map[string]*tls.Config // by cluster + node; dropped when the etcd CA secret changes
	caRV     map[clusterKey]string
}

func newEtcdSim(kube *kubernetes.Clientset) *etcdSim {
	e := &etcdSim{
		kube:     kube,
		listener: newStreamListener(),
		clusters: map[clusterKey]*clusterState{},
		certs:    map[string]*tls.Config{},
		caRV:     map[clusterKey]string{},
	}
	e.grpc = grpc.NewServer(grpc.Creds(memberCreds{}))
	pb.RegisterClusterServer(e.grpc, &clusterServer{e: e})
	pb.RegisterMaintenanceServer(e.grpc, &maintenanceServer{e: e})
	go func() { _ = e.grpc.Serve(e.listener) }()
	return e
}

func (e *etcdSim) stop() { e.grpc.Stop() }

// serve answers one port-forwarded connection to the etcd member on node: TLS as kubeadm's etcd serves it
// (a certificate of the Cluster's etcd CA, client certificates verified), then gRPC.
func (e *etcdSim) serve(ctx context.Context, node string, stream io.ReadWriteCloser) error {
	key, err := e.clusterOfNode(ctx, node)
	if err != nil {
		log.Printf("etcd-%s: %v", node, err)
		return err
	}
	cfg, err := e.tlsFor(ctx, key, node)
	if err != nil {
		log.Printf("etcd-%s (%s): %v", node, key, err)
		return err
	}
	raw := &streamConn{ReadWriteCloser: stream, closed: make(chan struct{})}
	conn := tls.Server(raw, cfg)
	hctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := conn.HandshakeContext(hctx); err != nil {
		log.Printf("etcd-%s (%s): TLS handshake: %v", node, key, err)
		return err
	}
	e.listener.conns <- &memberConn{Conn: conn, member: memberAuth{cluster: key, node: node}}
	select {
	case <-raw.closed:
	case <-ctx.Done():
		_ = conn.Close()
	}
	return nil
}

func (e *etcdSim) clusterOfNode(ctx context.Context, node string) (clusterKey, error) {
	n, err := e.kube.CoreV1().Nodes().Get(ctx, node, metav1.GetOptions{})
	if err != nil {
		return clusterKey{}, fmt.Errorf("node %s: %w", node, err)
	}
	key := clusterKey{namespace: n.Labels[labelClusterNamespace], name: n.Labels[labelClusterName]}
	if key.namespace == "" || key.name == "" {
		return clusterKey{}, fmt.Errorf("node %s has no %s/%s labels: not a simulated control-plane Node", node, labelClusterNamespace, labelClusterName)
	}
	return key, nil
}

// tlsFor: a serving certificate for the member, signed by the Cluster's etcd CA (KCP's `<cluster>-etcd` Secret).
func (e *etcdSim) tlsFor(ctx context.Context, key clusterKey, node string) (*tls.Config, error) {
	secret, err := e.kube.CoreV1().Secrets(key.namespace).Get(ctx, key.name+"-etcd", metav1.GetOptions{})
	if err != nil {
		return nil, fmt.Errorf("etcd CA: %w", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.caRV[key] != secret.ResourceVersion {
		for k := range e.certs {
			if len(k) > len(key.String()) && k[:len(key.String())+1] == key.String()+"|" {
				delete(e.certs, k)
			}
		}
		e.caRV[key] = secret.ResourceVersion
	}
	id := key.String() + "|" + node
	if cfg := e.certs[id]; cfg != nil {
		return cfg, nil
	}
	ca, err := tls.X509KeyPair(secret.Data[corev1.TLSCertKey], secret.Data[corev1.TLSPrivateKeyKey])
	if err != nil {
		return nil, fmt.Errorf("etcd CA %s/%s-etcd: %w", key.namespace, key.name, err)
	}
	caCert, err := x509.ParseCertificate(ca.Certificate[0])
	if err != nil {
		return nil, err
	}
	leafKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: node},
		NotBefore:    time.Now().Add(-time.Hour),
		NotAfter:     time.Now().Add(365 * 24 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
		DNSNames:     []string{node, "etcd-" + node, "localhost"},
		IPAddresses:  []net.IP{net.ParseIP("127.0.0.1")},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, caCert, &leafKey.PublicKey, ca.PrivateKey.(crypto.Signer))
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	pool.AddCert(caCert)
	cfg := &tls.Config{
		Certificates: []tls.Certificate{{Certificate: [][]byte{der, ca.Certificate[0]}, PrivateKey: leafKey}},
		ClientAuth:   tls.RequireAndVerifyClientCert,
		ClientCAs:    pool,
		NextProtos:   []string{"h2"}, // gRPC clients require ALPN h2
		MinVersion:   tls.VersionTLS12,
	}
	e.certs[id] = cfg
	return cfg, nil
}

type member struct {
	id      uint64
	name    string
	created time.Time
	learner bool
}

func memberID(name string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(name))
	return h.Sum64() | 1
}

func clusterID(key clusterKey) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(key.String()))
	return h.Sum64() | 1
}

// members of the Cluster: its control-plane Nodes not removed by KCP, oldest first; and the leader.
func (e *etcdSim) members(ctx context.Context, key clusterKey) ([]member, uint64, error) {
	nodes, err := e.kube.CoreV1().Nodes().List(ctx, metav1.ListOptions{
		LabelSelector: fmt.Sprintf("%s=%s,%s=%s,%s", labelClusterNamespace, key.namespace, labelClusterName, key.name, labelControlPlane),
	})
	if err != nil {
		return nil, 0, status.Errorf(codes.Unavailable, "listing the members' Nodes: %v", err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	st := e.clusters[key]
	if st == nil {
		st = &clusterState{removed: map[uint64]bool{}}
		e.clusters[key] = st
	}
	var out []member
	for _, n := range nodes.Items {
		if n.DeletionTimestamp != nil {
			continue
		}
		id := memberID(n.Name)
		if st.removed[id] {
			continue
		}
		out = append(out, member{id: id, name: n.Name, created: n.CreationTimestamp.Time})
	}
	// Members a failed control-plane join left behind as learners (cluster-api #13221): named in the
	// ConfigMap <cluster>-sim-etcd that the simulation writes; they have no Node and are never promoted.
	if cm, err := e.kube.CoreV1().ConfigMaps(key.namespace).Get(ctx, key.name+"-sim-etcd", metav1.GetOptions{}); err == nil {
		for _, name := range strings.Split(cm.Data["learners"], "\n") {
			if name = strings.TrimSpace(name); name != "" && !st.removed[memberID(name)] {
				out = append(out, member{id: memberID(name), name: name, created: cm.CreationTimestamp.Time, learner: true})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].created.Equal(out[j].created) {
			return out[i].created.Before(out[j].created)
		}
		return out[i].name < out[j].name
	})
	leaderPresent := false
	for _, m := range out {
		if m.id == st.leader && !m.learner {
			leaderPresent = true
		}
	}
	if !leaderPresent {
		st.leader = 0
		for _, m := range out {
			if !m.learner {
				st.leader = m.id
				break
			}
		}
	}
	return out, st.leader, nil
}

// self: the member this connection reached; an error if it is no member (removed, or its Node is gone).
func (e *etcdSim) self(ctx context.Context) (memberAuth, []member, uint64, member, error) {
	p, ok := peer.FromContext(ctx)
	if !ok {
		return memberAuth{}, nil, 0, member{}, status.Error(codes.Internal, "no peer")
	}
	a, ok := p.AuthInfo.(memberAuth)
	if !ok {
		return memberAuth{}, nil, 0, member{}, status.Error(codes.Internal, "unknown connection")
	}
	ms, leader, err := e.members(ctx, a.cluster)
	if err != nil {
		return a, nil, 0, member{}, err
	}
	for _, m := range ms {
		if m.name == a.node {
			return a, ms, leader, m, nil
		}
	}
	return a, nil, 0, member{}, status.Errorf(codes.Unavailable, "etcdserver: the member on %s was removed from the cluster", a.node)
}

func header(key clusterKey, self member) *pb.ResponseHeader {
	return &pb.ResponseHeader{ClusterId: clusterID(key), MemberId: self.id, Revision: 1, RaftTerm: 2}
}

func toPB(ms []member) []*pb.Member {
	out := make([]*pb.Member, 0, len(ms))
	for _, m := range ms {
		out = append(out, &pb.Member{ID: m.id, Name: m.name, PeerURLs: []string{"https://127.0.0.1:2380"}, ClientURLs: []string{"https://127.0.0.1:2379"}, IsLearner: m.learner})
	}
	return out
}

type clusterServer struct {
	pb.UnimplementedClusterServer
	e *etcdSim
}

func (s *clusterServer) MemberList(ctx context.Context, _ *pb.MemberListRequest) (*pb.MemberListResponse, error) {
	a, ms, _, self, err := s.e.self(ctx)
	if err != nil {
		return nil, err
	}
	return &pb.MemberListResponse{Header: header(a.cluster, self), Members: toPB(ms)}, nil
}

func (s *clusterServer) MemberRemove(ctx context.Context, req *pb.MemberRemoveRequest) (*pb.MemberRemoveResponse, error) {
	a, ms, _, self, err := s.e.self(ctx)
	if err != nil {
		return nil, err
	}
	var gone *member
	for i := range ms {
		if ms[i].id == req.ID {
			gone = &ms[i]
		}
	}
	if gone == nil {
		return nil, status.Error(codes.NotFound, "etcdserver: member not found")
	}
	s.e.mu.Lock()
	s.e.clusters[a.cluster].removed[req.ID] = true
	s.e.mu.Unlock()
	log.Printf("etcd %s: member %s (%x) removed (asked through %s)", a.cluster, gone.name, gone.id, a.node)
	rest, _, err := s.e.members(ctx, a.cluster)
	if err != nil {
		return nil, err
	}
	return &pb.MemberRemoveResponse{Header: header(a.cluster, self), Members: toPB(rest)}, nil
}

type maintenanceServer struct {
	pb.UnimplementedMaintenanceServer
	e *etcdSim
}

func (s *maintenanceServer) Status(ctx context.Context, _ *pb.StatusRequest) (*pb.StatusResponse, error) {
	a, _, leader, self, err := s.e.self(ctx)
	if err != nil {
		return nil, err
	}
	return &pb.StatusResponse{Header: header(a.cluster, self), Version: etcdVersion, DbSize: 4 << 20, DbSizeInUse: 2 << 20, Leader: leader, RaftIndex: 100, RaftTerm: 2, RaftAppliedIndex: 100}, nil
}

func (s *maintenanceServer) Alarm(ctx context.Context, req *pb.AlarmRequest) (*pb.AlarmResponse, error) {
	a, _, _, self, err := s.e.self(ctx)
	if err != nil {
		return nil, err
	}
	if req.Action != pb.AlarmRequest_GET {
		return nil, status.Error(codes.Unimplemented, "the simulation raises no alarms")
	}
	return &pb.AlarmResponse{Header: header(a.cluster, self)}, nil
}

func (s *maintenanceServer) MoveLeader(ctx context.Context, req *pb.MoveLeaderRequest) (*pb.MoveLeaderResponse, error) {
	a, ms, leader, self, err := s.e.self(ctx)
	if err != nil {
		return nil, err
	}
	if self.id != leader {
		return nil, status.Error(codes.FailedPrecondition, "etcdserver: not leader")
	}
	for _, m := range ms {
		if m.id == req.TargetID {
			s.e.mu.Lock()
			s.e.clusters[a.cluster].leader = m.id
			s.e.mu.Unlock()
			log.Printf("etcd %s: leader moved from %s to %s", a.cluster, self.name, m.name)
			return &pb.MoveLeaderResponse{Header: header(a.cluster, self)}, nil
		}
	}
	return nil, status.Error(codes.NotFound, "etcdserver: bad leader transferee")
}

// ---- plumbing: port-forwarded streams as connections of one gRPC server ----

type memberAuth struct {
	cluster clusterKey
	node    string
}

func (memberAuth) AuthType() string { return "sim-etcd-member" }

type memberConn struct {
	net.Conn
	member memberAuth
}

// memberCreds: TLS is done before the connection reaches gRPC; the handshake only tells which member it is.
type memberCreds struct{}

func (memberCreds) ClientHandshake(context.Context, string, net.Conn) (net.Conn, credentials.AuthInfo, error) {
	return nil, nil, fmt.Errorf("server only")
}
func (memberCreds) ServerHandshake(c net.Conn) (net.Conn, credentials.AuthInfo, error) {
	mc, ok := c.(*memberConn)
	if !ok {
		return nil, nil, fmt.Errorf("unexpected connection")
	}
	return mc, mc.member, nil
}
func (memberCreds) Info() credentials.ProtocolInfo {
	return credentials.ProtocolInfo{SecurityProtocol: "tls"}
}
func (c memberCreds) Clone() credentials.TransportCredentials { return c }
func (memberCreds) OverrideServerName(string) error           { return nil }

type streamListener struct {
	conns  chan net.Conn
	closed chan struct{}
	once   sync.Once
}

func newStreamListener() *streamListener {
	return &streamListener{conns: make(chan net.Conn), closed: make(chan struct{})}
}

func (l *streamListener) Accept() (net.Conn, error) {
	select {
	case c := <-l.conns:
		return c, nil
	case <-l.closed:
		return nil, net.ErrClosed
	}
}
func (l *streamListener) Close() error   { l.once.Do(func() { close(l.closed) }); return nil }
func (l *streamListener) Addr() net.Addr { return simAddr("etcd") }

type simAddr string

func (a simAddr) Network() string { return "port-forward" }
func (a simAddr) String() string  { return string(a) }

// streamConn: a port-forward data stream as a net.Conn (deadlines are not supported; the stream's idle timeout applies).
type streamConn struct {
	io.ReadWriteCloser
	closed chan struct{}
	once   sync.Once
}

func (c *streamConn) Close() error {
	c.once.Do(func() { close(c.closed) })
	return c.ReadWriteCloser.Close()
}
func (c *streamConn) LocalAddr() net.Addr              { return simAddr("etcd-member") }
func (c *streamConn) RemoteAddr() net.Addr             { return simAddr("port-forward") }
func (c *streamConn) SetDeadline(time.Time) error      { return nil }
func (c *streamConn) SetReadDeadline(time.Time) error  { return nil }
func (c *streamConn) SetWriteDeadline(time.Time) error { return nil }
