//go:build clustere2e

package clustere2e

import "testing"

// TestCluster runs against the release make e2e-cluster installed, in
// order: each part builds on the state the one before left.
func TestCluster(t *testing.T) {
	c := newCluster(t)
	t.Run("upgraded from the previous release with kubectl apply while its links are clicked", c.testUpgradeWithKubectl)
	t.Run("the release's pods run as 65532 on a read-only root, restricted, probes passing", c.testPods)
	t.Run("the samples redirect through the redirector Service", c.testSamples)
	t.Run("a link's spec.code moved to a taken code keeps its short URL answering, clicked through the Service", c.testCodeChange)
	t.Run("a limited link serves exactly maxUses through the Service", c.testMaxUses)
	t.Run("a single-use link fetched by Slack's previewer, then clicked by its person, through the Service", c.testPreviewers)
	t.Run("a password link through the Service: previewers, HEAD and wrong passwords spend nothing, the right one is its use", c.testGatedLinks)
	t.Run("metrics scraped from the pods' ports", c.testMetrics)
	t.Run("rollout restart of the redirectors during a burst of clicks", c.testRolloutRestart)
	t.Run("the redirector holding a link's quota is deleted while it is clicked", c.testHolderDeleted)
	t.Run("the redirector process holding a link's quota is killed (SIGKILL) while it is clicked", c.testHolderKilled)
	t.Run("the peer key rotated with kubectl linkforge, then its Secret deleted, while links are clicked", c.testKeyRotation)
	t.Run("kubectl linkforge against the node", c.testPlugin)
	t.Run("two managers: the leader's pod is deleted, the other leads and links converge", c.testLeaderFailover)
	t.Run("uninstalled with kubectl delete; the previous chart upgraded to this one with helm upgrade while clicked; the destination policy", c.testUninstallThenHelm)
}
