package controllers

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	gatewayv1 "sigs.k8s.io/gateway-api/apis/v1"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/testenv"
)

var (
	cfg       *rest.Config
	k8sClient client.Client
	testEnv   *envtest.Environment
	scheme    = runtime.NewScheme()
	suiteCtx  context.Context
	stopSuite context.CancelFunc
)

func init() {
	utilruntime.Must(clientgoscheme.AddToScheme(scheme))
	utilruntime.Must(linkv1.AddToScheme(scheme))
	utilruntime.Must(gatewayv1.Install(scheme))
}

func TestControllers(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "Controllers Suite")
}

var _ = BeforeSuite(func() {
	logf.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	suiteCtx, stopSuite = context.WithCancel(context.TODO())

	var err error
	testEnv, cfg, err = testenv.Start()
	Expect(err).NotTo(HaveOccurred())
	cfg.QPS, cfg.Burst = 500, 1000
	k8sClient, err = client.New(cfg, client.Options{Scheme: scheme})
	Expect(err).NotTo(HaveOccurred())
})

var _ = AfterSuite(func() {
	stopSuite()
	if testEnv != nil {
		Expect(testEnv.Stop()).To(Succeed())
	}
})

var nsCounter atomic.Int64

// newNamespace creates a namespace of its own for one test.
func newNamespace(prefix string) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: fmt.Sprintf("%s-%d-%d", prefix, GinkgoParallelProcess(), nsCounter.Add(1)),
	}}
	Expect(k8sClient.Create(suiteCtx, ns)).To(Succeed())
	return ns.Name
}

// inNamespace is bin/manager's cache (ManagerCacheOptions) limited to one
// namespace, so specs that run one after another do not act on each other's
// links, and the code index to give the ShortLinkReconciler.
func inNamespace(ns string) (ctrl.Options, *CodeIndex) {
	index := NewCodeIndex()
	return ctrl.Options{Cache: ManagerCacheOptions([]string{ns}, index)}, index
}

// startManagerWith runs a manager with opts (a namespace-scoped cache, say)
// and what setup registers until the test ends, or until stop is called. It
// returns once the manager's caches have synced.
func startManagerWith(opts ctrl.Options, setup func(ctx context.Context, mgr ctrl.Manager) error) (stop func()) {
	GinkgoHelper()
	return startManagerAs(cfg, opts, setup)
}

// startManagerAs is startManagerWith for a client of config c (another
// user's, say).
func startManagerAs(c *rest.Config, opts ctrl.Options, setup func(ctx context.Context, mgr ctrl.Manager) error) (stop func()) {
	GinkgoHelper()
	opts.Scheme = scheme
	opts.Metrics = metricsserver.Options{BindAddress: "0"}
	opts.HealthProbeBindAddress = "0"
	// Several managers run in one process in these tests.
	opts.Controller = config.Controller{SkipNameValidation: ptr.To(true)}
	mgr, err := ctrl.NewManager(c, opts)
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(suiteCtx)
	Expect(setup(ctx, mgr)).To(Succeed())
	done := make(chan struct{})
	go func() {
		defer GinkgoRecover()
		defer close(done)
		Expect(mgr.Start(ctx)).To(Succeed())
	}()
	stop = func() {
		cancel()
		Eventually(done).WithTimeout(30 * time.Second).Should(BeClosed())
	}
	DeferCleanup(stop)
	Expect(mgr.GetCache().WaitForCacheSync(ctx)).To(BeTrue())
	return stop
}
