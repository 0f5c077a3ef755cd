//go:build clustere2e

package clustere2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/linkforge/linkforge/internal/testtiming"
)

// testPods: both Deployments become Available in the restricted namespace,
// and what the kubelet started is what the manifests promise, as the
// kernel shows it: each container's process runs as 65532:65532 with no
// capabilities, no new privileges and a seccomp filter, on a read-only
// root file system; its probes pass (the kubelet's own probe metrics).
func (c *cluster) testPods(t *testing.T) {
	g, c := newG(t), c.in(t)
	c.dumpOnFailure()
	ns, err := c.cs.CoreV1().Namespaces().Get(context.Background(), systemNS, metav1.GetOptions{})
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(ns.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "restricted"))

	started := time.Now()
	for _, name := range []string{managerName, redirectorName} {
		g.Eventually(func() error { return c.available(name) }).WithTimeout(3 * time.Minute).Should(Succeed())
	}
	testtiming.Of(t).Logf("both Deployments Available %.1fs after the suite started", time.Since(started).Seconds())

	all := append(c.pods("manager"), c.pods("redirector")...)
	g.Expect(c.pods("redirector")).To(HaveLen(2))
	g.Expect(c.pods("manager")).To(HaveLen(1))
	for _, p := range all {
		g.Expect(podReady(&p)).To(BeTrue(), "pod %s Ready", p.Name)
		g.Expect(p.Spec.SecurityContext.RunAsNonRoot).To(HaveValue(BeTrue()))
		for i, ctr := range p.Spec.Containers {
			g.Expect(ctr.LivenessProbe).NotTo(BeNil(), "%s/%s liveness probe", p.Name, ctr.Name)
			g.Expect(ctr.ReadinessProbe).NotTo(BeNil(), "%s/%s readiness probe", p.Name, ctr.Name)
			st := p.Status.ContainerStatuses[i]
			g.Expect(st.Ready).To(BeTrue())
			g.Expect(st.RestartCount).To(BeZero(), "%s/%s restarted", p.Name, st.Name)
			id := strings.TrimPrefix(st.ContainerID, "containerd://")
			g.Expect(id).NotTo(Equal(st.ContainerID), "a containerd container")
			pid, err := containerPid(id)
			g.Expect(err).NotTo(HaveOccurred(), "the process of %s/%s", p.Name, ctr.Name)
			status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
			g.Expect(err).NotTo(HaveOccurred())
			fields := procStatus(string(status))
			g.Expect(fields).To(HaveKeyWithValue("Uid", "65532 65532 65532 65532"), "%s/%s runs as 65532", p.Name, ctr.Name)
			g.Expect(fields).To(HaveKeyWithValue("Gid", "65532 65532 65532 65532"))
			g.Expect(fields).To(HaveKeyWithValue("CapEff", "0000000000000000"), "no capabilities")
			g.Expect(fields).To(HaveKeyWithValue("NoNewPrivs", "1"))
			g.Expect(fields).To(HaveKeyWithValue("Seccomp", "2"), "a seccomp filter (RuntimeDefault)")
			g.Expect(rootMountOptions(pid)).To(ContainElement("ro"), "%s/%s: a read-only root file system", p.Name, ctr.Name)
			// The pod's network reaches the bridge and the Service range,
			// nothing else: no default route.
			routes, err := exec.Command("nsenter", "-t", strconv.Itoa(pid), "-n", "ip", "-4", "route").CombinedOutput()
			g.Expect(err).NotTo(HaveOccurred(), "%s", routes)
			g.Expect(string(routes)).NotTo(ContainSubstring("default"), "%s has a default route", p.Name)
			g.Expect(strings.Split(strings.TrimSpace(string(routes)), "\n")).To(HaveLen(2), "the pod subnet and the Service range only:\n%s", routes)
		}
	}

	// The restricted level is enforced: a pod that asks for root is refused.
	out, err := c.kubectl(`apiVersion: v1
kind: Pod
metadata: {name: root-pod, namespace: linkforge-system}
spec:
  containers:
  - {name: c, image: linkforge.invalid/pause:1, securityContext: {runAsUser: 0}}
`, "create", "--dry-run=server", "-f", "-")
	g.Expect(err).To(HaveOccurred())
	g.Expect(out).To(ContainSubstring(`violates PodSecurity "restricted:`))

	// The kubelet's probe results: every probe of every container has
	// passed, and none has failed since the pods became Ready.
	g.Eventually(func() (string, error) { return c.probeMetrics(all) }).Should(BeEmpty())
}

// available fails unless the Deployment is Available with every replica
// updated and ready.
func (c *cluster) available(name string) error {
	d, err := c.cs.AppsV1().Deployments(systemNS).Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return err
	}
	want := int32(1)
	if d.Spec.Replicas != nil {
		want = *d.Spec.Replicas
	}
	for _, cond := range d.Status.Conditions {
		if cond.Type == appsv1.DeploymentAvailable && cond.Status == corev1.ConditionTrue &&
			d.Status.ReadyReplicas == want && d.Status.UpdatedReplicas == want && d.Status.Replicas == want {
			return nil
		}
	}
	return fmt.Errorf("deployment %s: %d/%d ready, %d updated, %d in all", name, d.Status.ReadyReplicas, want, d.Status.UpdatedReplicas, d.Status.Replicas)
}

func podReady(p *corev1.Pod) bool {
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodReady {
			return cond.Status == corev1.ConditionTrue
		}
	}
	return false
}

// containerPid returns the pid of the container's process: the process
// in the container's cgroup (the tests run as root on the node).
func containerPid(id string) (int, error) {
	ents, err := os.ReadDir("/proc")
	if err != nil {
		return 0, err
	}
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cg, err := os.ReadFile(fmt.Sprintf("/proc/%d/cgroup", pid))
		if err != nil || !strings.Contains(string(cg), id) {
			continue
		}
		// Not the shim: the container's own process.
		if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err == nil && !strings.HasPrefix(string(comm), "containerd-shim") {
			return pid, nil
		}
	}
	return 0, fmt.Errorf("%w in the cgroup of container %s", errNoPid, id)
}

// procStatus parses /proc/<pid>/status into its fields, values' runs of
// blanks as one space.
func procStatus(s string) map[string]string {
	m := map[string]string{}
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(line, ":")
		if ok {
			m[k] = strings.Join(strings.Fields(v), " ")
		}
	}
	return m
}

// rootMountOptions returns the mount options of the process' "/".
func rootMountOptions(pid int) []string {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/mountinfo", pid))
	if err != nil {
		return nil
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) > 5 && f[4] == "/" {
			return strings.Split(f[5], ",")
		}
	}
	return nil
}

// probeMetrics reads the kubelet's prober_probe_total (through the API
// server's node proxy) and returns what is wrong: a container of pods
// whose liveness or readiness probe has no success, or any failure.
func (c *cluster) probeMetrics(pods []corev1.Pod) (string, error) {
	nodes, err := c.cs.CoreV1().Nodes().List(context.Background(), metav1.ListOptions{})
	if err != nil || len(nodes.Items) != 1 {
		return "", fmt.Errorf("want one node: %v", err)
	}
	raw, err := c.cs.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", nodes.Items[0].Name, "proxy", "metrics", "probes").DoRaw(context.Background())
	if err != nil {
		return "", err
	}
	var wrong []string
	for _, p := range pods {
		for _, ctr := range p.Spec.Containers {
			for _, typ := range []string{"Liveness", "Readiness"} {
				prefix := fmt.Sprintf(`prober_probe_total{container=%q,namespace=%q,pod=%q,pod_uid=%q,probe_type=%q,result=`,
					ctr.Name, p.Namespace, p.Name, p.UID, typ)
				ok, failed := metricValue(string(raw), prefix+`"successful"}`), metricValue(string(raw), prefix+`"failed"}`)
				if ok < 1 {
					wrong = append(wrong, fmt.Sprintf("%s/%s %s: no success yet", p.Name, ctr.Name, typ))
				}
				if failed > 0 && typ == "Liveness" {
					wrong = append(wrong, fmt.Sprintf("%s/%s %s: %v failures", p.Name, ctr.Name, typ, failed))
				}
			}
		}
	}
	return strings.Join(wrong, "; "), nil
}

// metricValue returns the value of the sample whose name and labels are
// exactly series in a Prometheus text exposition (0 when absent).
func metricValue(text, series string) float64 {
	for _, line := range strings.Split(text, "\n") {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			v, _ := strconv.ParseFloat(strings.Fields(rest)[0], 64)
			return v
		}
	}
	return 0
}
