//go:build clustere2e

package clustere2e

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/linkforge/linkforge/internal/testtiming"
)

// leaseName is the manager's leader election Lease (controllers.DefaultLeaderElectionID).
const leaseName = "manager.linkforge.io"

// leader returns the pod name of the Lease's holder ("<pod>_<uuid>").
func (c *cluster) leader() (string, error) {
	l, err := c.cs.CoordinationV1().Leases(systemNS).Get(context.Background(), leaseName, metav1.GetOptions{})
	if err != nil {
		return "", err
	}
	if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity == "" {
		return "", nil
	}
	pod, _, _ := strings.Cut(*l.Spec.HolderIdentity, "_")
	return pod, nil
}

// The manager's leader election: controller-runtime's defaults. A
// candidate retries every leaseRetryPeriod; a Lease its holder did not
// release is free leaseDuration after its last renewal.
const (
	leaseDuration    = 15 * time.Second
	leaseRetryPeriod = 2 * time.Second
)

// testLeaderFailover: two manager replicas; the leader's pod is deleted
// (as kubectl does: SIGTERM, and the manager releases its Lease); the
// other replica (or the pod replacing it) leads within the Lease's
// duration and a retry (at once, since the Lease is released; a Lease left
// held is free after its duration), and links created meanwhile become
// Ready and redirect.
func (c *cluster) testLeaderFailover(t *testing.T) {
	g, c := newG(t), c.in(t)
	c.dumpOnFailure()
	c.mustKubectl("scale", "deployment/"+managerName, "-n", systemNS, "--replicas=2")
	t.Cleanup(func() { _, _ = c.kubectl("", "scale", "deployment/"+managerName, "-n", systemNS, "--replicas=1") })
	g.Eventually(func() error { return c.available(managerName) }).WithTimeout(3 * time.Minute).Should(Succeed())
	managers := c.pods("manager")
	g.Expect(managers).To(HaveLen(2))
	var old string
	g.Eventually(func() (string, error) {
		var err error
		old, err = c.leader()
		return old, err
	}).Should(BeElementOf(managers[0].Name, managers[1].Name))

	ns := c.namespace("failover")
	started := time.Now()
	c.mustKubectl("delete", "pod", "-n", systemNS, old, "--wait=false")
	// Links created while the leader goes.
	const n = 5
	for i := 0; i < n; i++ {
		c.apply(fmt.Sprintf("apiVersion: linkforge.io/v1alpha1\nkind: ShortLink\nmetadata: {name: during-%d, namespace: %s}\nspec: {url: 'https://example.com/during/%d'}\n", i, ns, i))
	}
	// The other replica, or the one replacing the deleted pod: whichever
	// takes the Lease first.
	var leader string
	g.Eventually(func() (string, error) {
		var err error
		leader, err = c.leader()
		return leader, err
	}).WithPolling(100*time.Millisecond).WithTimeout(loadedMachine*(leaseDuration+leaseRetryPeriod)).
		Should(And(Not(BeEmpty()), Not(Equal(old))), "another manager leads within the Lease's duration and a retry")
	led := time.Since(started)
	c.mustKubectl("wait", "--for=condition=Ready", "-n", ns, "shortlink", "--all", "--timeout=90s")
	converged := time.Since(started)
	testtiming.Of(t).Logf("leader %s deleted; %s leads after %s; the %d links created meanwhile Ready after %s",
		old, leader, led.Round(100*time.Millisecond), n, converged.Round(100*time.Millisecond))

	svc := c.redirectorURL()
	for i := 0; i < n; i++ {
		code := c.mustKubectl("get", "-n", ns, "shortlink", fmt.Sprintf("during-%d", i), "-o", "jsonpath={.status.code}")
		g.Eventually(func() (string, error) {
			status, loc, err := click(http.MethodGet, svc+"/"+ns+"/"+code)
			return fmt.Sprintf("%d %s", status, loc), err
		}).Should(Equal(fmt.Sprintf("302 https://example.com/during/%d", i)))
	}
}
