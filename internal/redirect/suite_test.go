package redirect_test

import (
	"context"
	"io"
	"net"
	"net/url"
	"sync"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	clocktesting "k8s.io/utils/clock/testing"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/redirect"
	"github.com/linkforge/linkforge/internal/testenv"
)

// The envtest suite runs a real kube-apiserver and etcd, and the redirector's
// index fed by a controller-runtime manager's informers, as cmd/redirector
// wires it. No controller runs: the specs write ShortLink status themselves.
// The manager reaches the API server through a TCP proxy the specs can cut,
// to show that the redirector keeps serving while the API server is
// unreachable and catches up when it returns.

var (
	testEnv   *envtest.Environment
	k8sClient client.Client
	red       *redirect.Redirector
	fakeClock *clocktesting.FakeClock
	apiProxy  *tcpProxy
	restCfg   *rest.Config
	scheme    = runtime.NewScheme()
	cancel    context.CancelFunc
	mgrDone   chan struct{}
)

const tombstoneTTL = time.Hour

func TestRedirectorEnvtest(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Redirector envtest suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))

	var (
		cfg *rest.Config
		err error
	)
	testEnv, cfg, err = testenv.Start()
	Expect(err).NotTo(HaveOccurred())
	restCfg = cfg

	Expect(clientgoscheme.AddToScheme(scheme)).To(Succeed())
	Expect(linkv1.AddToScheme(scheme)).To(Succeed())
	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())

	apiProxy = newTCPProxy(cfg.Host)
	proxied := rest.CopyConfig(cfg)
	proxied.Host = "https://" + apiProxy.addr
	proxied.ServerName = "localhost" // the API server's certificate names localhost and 127.0.0.1

	mgr, err := ctrl.NewManager(proxied, ctrl.Options{
		Scheme:                 scheme,
		LeaderElection:         false,
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  redirect.CacheOptions(),
	})
	Expect(err).NotTo(HaveOccurred())

	fakeClock = clocktesting.NewFakeClock(time.Now())
	red = redirect.New(redirect.Options{
		TombstoneTTL: tombstoneTTL,
		Clock:        fakeClock,
		Registry:     prometheus.NewRegistry(),
		Recorder:     mgr.GetEventRecorder("linkforge-redirector"),
		Log:          ctrl.Log.WithName("redirector"),
	})
	Expect(red.SetupWithManager(mgr)).To(Succeed())

	var ctx context.Context
	ctx, cancel = context.WithCancel(context.Background())
	mgrDone = make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(mgrDone)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	Eventually(red.Ready).WithTimeout(60 * time.Second).Should(BeTrue())
})

var _ = AfterSuite(func() {
	if cancel != nil {
		cancel()
		Eventually(mgrDone).WithTimeout(30 * time.Second).Should(BeClosed())
	}
	if apiProxy != nil {
		apiProxy.close()
	}
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

// tcpProxy forwards a local port to the API server; cut drops every
// connection and refuses new ones until restore.
type tcpProxy struct {
	target string
	addr   string

	mu    sync.Mutex
	ln    net.Listener
	down  bool
	conns map[net.Conn]struct{}
}

func newTCPProxy(apiURL string) *tcpProxy {
	u, err := url.Parse(apiURL)
	Expect(err).NotTo(HaveOccurred())
	p := &tcpProxy{target: u.Host, conns: map[net.Conn]struct{}{}}
	p.listen("127.0.0.1:0")
	return p
}

func (p *tcpProxy) listen(addr string) {
	ln, err := net.Listen("tcp", addr)
	Expect(err).NotTo(HaveOccurred())
	p.mu.Lock()
	p.ln, p.addr, p.down = ln, ln.Addr().String(), false
	p.mu.Unlock()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			go p.pipe(c)
		}
	}()
}

func (p *tcpProxy) pipe(c net.Conn) {
	up, err := net.Dial("tcp", p.target)
	if err != nil {
		_ = c.Close()
		return
	}
	p.mu.Lock()
	if p.down {
		p.mu.Unlock()
		_ = c.Close()
		_ = up.Close()
		return
	}
	p.conns[c], p.conns[up] = struct{}{}, struct{}{}
	p.mu.Unlock()
	done := make(chan struct{}, 2)
	go func() { _, _ = io.Copy(up, c); done <- struct{}{} }()
	go func() { _, _ = io.Copy(c, up); done <- struct{}{} }()
	<-done
	_ = c.Close()
	_ = up.Close()
	p.mu.Lock()
	delete(p.conns, c)
	delete(p.conns, up)
	p.mu.Unlock()
}

// cut makes the API server unreachable for the manager.
func (p *tcpProxy) cut() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.down = true
	_ = p.ln.Close()
	for c := range p.conns {
		_ = c.Close()
	}
}

// restore makes it reachable again, on the same address.
func (p *tcpProxy) restore() { p.listen(p.addr) }

func (p *tcpProxy) close() { p.cut() }
