package controllers

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	lua "github.com/yuin/gopher-lua"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/clock"
	kstatus "sigs.k8s.io/cli-utils/pkg/kstatus/status"
	ctrl "sigs.k8s.io/controller-runtime"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/testenv"
)

// These tests read live links the way GitOps tools do: kstatus.Compute, which
// Flux's health checks and wait: true use, and the Argo CD health check that
// the README publishes, run in gopher-lua as Argo CD runs it. The script is
// read from the README at test time, so the documentation and the test
// cannot drift apart.

// argoHealthKey is the argocd-cm key of the README's health check.
const argoHealthKey = "resource.customizations.health.linkforge.io_ShortLink"

// readmeArgoHealthScript returns the Lua of the README's argocd-cm snippet:
// the value of argoHealthKey in the yaml block that holds it. Parsing the
// block as YAML also proves that the snippet can be pasted as it is.
func readmeArgoHealthScript() (string, error) {
	root, err := testenv.ModuleRoot()
	if err != nil {
		return "", err
	}
	readme, err := os.ReadFile(filepath.Join(root, "docs", "gitops.md"))
	if err != nil {
		return "", err
	}
	var found []string
	for _, m := range regexp.MustCompile("(?ms)^```yaml\n(.*?)^```").FindAllStringSubmatch(string(readme), -1) {
		if !strings.Contains(m[1], argoHealthKey) {
			continue
		}
		var data map[string]string
		if err := yaml.Unmarshal([]byte(m[1]), &data); err != nil {
			return "", fmt.Errorf("the README's argocd-cm snippet is not valid YAML: %w", err)
		}
		found = append(found, data[argoHealthKey])
	}
	if len(found) != 1 || found[0] == "" {
		return "", fmt.Errorf("want one yaml block with %s in docs/gitops.md, found %d", argoHealthKey, len(found))
	}
	return found[0], nil
}

// argoHealth runs a health script the way Argo CD's Lua VM does: no standard
// libraries but package, base and table (Argo CD adds a restricted os, which
// this check does not need), a one-second budget, the live object as the
// global obj, and a returned table whose status must be one Argo CD knows.
func argoHealth(script string, u *unstructured.Unstructured) (status, message string, err error) {
	l := lua.NewState(lua.Options{SkipOpenLibs: true})
	defer l.Close()
	for _, lib := range []struct {
		name string
		open lua.LGFunction
	}{
		{lua.LoadLibName, lua.OpenPackage},
		{lua.BaseLibName, lua.OpenBase},
		{lua.TabLibName, lua.OpenTable},
	} {
		if err := l.CallByParam(lua.P{Fn: l.NewFunction(lib.open), Protect: true}, lua.LString(lib.name)); err != nil {
			return "", "", err
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	l.SetContext(ctx)
	l.SetGlobal("obj", luaValue(l, u.Object))
	if err := l.DoString(script); err != nil {
		return "", "", err
	}
	ret, ok := l.Get(-1).(*lua.LTable)
	if !ok {
		return "", "", fmt.Errorf("the script returned %s, not a table", l.Get(-1).Type())
	}
	status, message = lua.LVAsString(ret.RawGetString("status")), lua.LVAsString(ret.RawGetString("message"))
	switch status {
	case "Healthy", "Progressing", "Degraded", "Suspended", "Missing", "Unknown":
		return status, message, nil
	}
	return "", "", fmt.Errorf("the script returned health %q, which Argo CD turns into Unknown", status)
}

// luaValue converts a decoded JSON object into Lua values as Argo CD does:
// objects and arrays become tables (arrays 1-based), every number a Lua
// number, whatever else nil.
func luaValue(l *lua.LState, v any) lua.LValue {
	switch v := v.(type) {
	case map[string]any:
		t := l.CreateTable(0, len(v))
		for k, item := range v {
			t.RawSetString(k, luaValue(l, item))
		}
		return t
	case []any:
		t := l.CreateTable(len(v), 0)
		for _, item := range v {
			t.Append(luaValue(l, item))
		}
		return t
	case string:
		return lua.LString(v)
	case bool:
		return lua.LBool(v)
	case int64:
		return lua.LNumber(v)
	case float64:
		return lua.LNumber(v)
	}
	return lua.LNil
}

// liveLink reads a link from the API server as unstructured, the form both
// kstatus and Argo CD see.
func liveLink(g Gomega, ns, name string) *unstructured.Unstructured {
	u := &unstructured.Unstructured{}
	u.SetGroupVersionKind(linkv1.GroupVersion.WithKind("ShortLink"))
	g.Expect(k8sClient.Get(suiteCtx, types.NamespacedName{Namespace: ns, Name: name}, u)).To(Succeed())
	return u
}

var _ = Describe("GitOps health", func() {
	It("reads every state of a live link as the README promises, in kstatus and in the README's Argo CD check", func() {
		script, err := readmeArgoHealthScript()
		Expect(err).NotTo(HaveOccurred())

		By("links reconciled by a running controller")
		ns := newNamespace("health")
		runLinkManagers(ns, 1)

		Expect(k8sClient.Create(suiteCtx, newLink(ns, "active", "https://example.com/active"))).To(Succeed())
		eventuallyReady(ns, "active")

		expired := newLink(ns, "expired", "https://example.com/expired")
		past := metav1.NewTime(time.Now().Add(-time.Hour).Truncate(time.Second))
		expired.Spec.ExpiresAt = &past
		Expect(k8sClient.Create(suiteCtx, expired)).To(Succeed())
		eventuallyState(ns, "expired", metav1.ConditionTrue, linkv1.ReasonExpired, linkv1.StateExpired)

		exhausted := newLink(ns, "exhausted", "https://example.com/exhausted")
		exhausted.Spec.MaxUses = ptrInt64(3)
		Expect(k8sClient.Create(suiteCtx, exhausted)).To(Succeed())
		eventuallyReady(ns, "exhausted")
		// What the redirectors write once they have served the last use.
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			l := getLink(Default, ns, "exhausted")
			l.Status.Uses = 3
			return k8sClient.Status().Update(suiteCtx, l)
		})).To(Succeed())
		eventuallyState(ns, "exhausted", metav1.ConditionTrue, linkv1.ReasonExhausted, linkv1.StateExhausted)

		holder := newLink(ns, "holder", "https://example.com/holder")
		holder.Spec.Code = "taken"
		Expect(k8sClient.Create(suiteCtx, holder)).To(Succeed())
		eventuallyReady(ns, "holder")
		// Created within the same second, "holder" still precedes: its name sorts first.
		wanter := newLink(ns, "wanter", "https://example.com/wanter")
		wanter.Spec.Code = "taken"
		Expect(k8sClient.Create(suiteCtx, wanter)).To(Succeed())
		eventuallyState(ns, "wanter", metav1.ConditionFalse, linkv1.ReasonCodeConflict, linkv1.StateConflict)
		// Kept: a link whose spec.code moved to the taken code keeps the one
		// it held, and serves there; its spec is not in effect, and it waits
		// for holder, which takes precedence.
		kept := newLink(ns, "kept", "https://example.com/kept")
		kept.Spec.Code = "first"
		Expect(k8sClient.Create(suiteCtx, kept)).To(Succeed())
		eventuallyReady(ns, "kept")
		setCode(ns, "kept", "taken")
		eventuallyState(ns, "kept", metav1.ConditionFalse, linkv1.ReasonCodeConflict, linkv1.StateKept)

		scheduled := newLink(ns, "scheduled", "https://example.com/scheduled")
		later := metav1.NewTime(time.Now().Add(time.Hour).Truncate(time.Second))
		scheduled.Spec.ActivatesAt = &later
		Expect(k8sClient.Create(suiteCtx, scheduled)).To(Succeed())
		eventuallyState(ns, "scheduled", metav1.ConditionTrue, linkv1.ReasonScheduled, linkv1.StateScheduled)

		Expect(k8sClient.Create(suiteCtx, newLink(ns, "invalid", "https://bank example.com/"))).To(Succeed())
		eventuallyState(ns, "invalid", metav1.ConditionFalse, linkv1.ReasonInvalidURL, linkv1.StateInvalid)

		By("links the controller has not seen, or reconciled one at a time by hand")
		// No controller runs here: the reconciler is called for chosen links
		// only, so a pending link stays pending and an edit stays unobserved.
		idle := newNamespace("health-idle")
		opts, index := inNamespace(idle)
		r := &ShortLinkReconciler{Clock: clock.RealClock{}, Index: index}
		startManagerWith(opts, func(ctx context.Context, mgr ctrl.Manager) error {
			r.Client = mgr.GetClient()
			return r.addCodeIndex(ctx, mgr.GetCache())
		})
		reconcileUntil := func(name string, state linkv1.LinkState) {
			GinkgoHelper()
			Eventually(func(g Gomega) {
				_, err := r.Reconcile(suiteCtx, ctrl.Request{NamespacedName: types.NamespacedName{Namespace: idle, Name: name}})
				g.Expect(err).NotTo(HaveOccurred())
				l := getLink(g, idle, name)
				g.Expect(l.Status.ObservedGeneration).To(Equal(l.Generation))
				g.Expect(l.Status.State).To(Equal(state))
			}).WithTimeout(20 * time.Second).Should(Succeed())
		}

		Expect(k8sClient.Create(suiteCtx, newLink(idle, "unobserved", "https://example.com/unobserved"))).To(Succeed())
		Expect(getLink(Default, idle, "unobserved").Status.ObservedGeneration).To(Equal(int64(-1)),
			"the CRD defaults a new link's status to observedGeneration -1")

		Expect(k8sClient.Create(suiteCtx, newLink(idle, "edited", "https://example.com/v1"))).To(Succeed())
		reconcileUntil("edited", linkv1.StateActive)
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			l := getLink(Default, idle, "edited")
			l.Spec.URL = "https://example.com/v2"
			return k8sClient.Update(suiteCtx, l)
		})).To(Succeed())

		// Pending: "older" declares code "pend", which a younger link with
		// another target still holds, as if it had taken the code before
		// "older" existed. "older" takes precedence (same second or not: its
		// name sorts first) and waits for "younger" to move.
		older := newLink(idle, "older", "https://example.com/older")
		older.Spec.Code = "pend"
		Expect(k8sClient.Create(suiteCtx, older)).To(Succeed())
		Expect(k8sClient.Create(suiteCtx, newLink(idle, "younger", "https://example.com/younger"))).To(Succeed())
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			l := getLink(Default, idle, "younger")
			l.Status.ObservedGeneration, l.Status.ConfirmedGeneration = l.Generation, l.Generation
			l.Status.Code, l.Status.CanonicalURL, l.Status.State = "pend", "https://example.com/younger", linkv1.StateActive
			l.Status.Conditions = []metav1.Condition{{
				Type: linkv1.ConditionReady, Status: metav1.ConditionTrue, Reason: linkv1.ReasonCodeAssigned,
				Message: "set by the test", ObservedGeneration: l.Generation, LastTransitionTime: metav1.Now(),
			}}
			return k8sClient.Status().Update(suiteCtx, l)
		})).To(Succeed())
		reconcileUntil("older", linkv1.StatePending)

		// Kept while moving: "kmove" held "mine" and now declares "pend2",
		// which a younger link still holds: it keeps serving "mine" until
		// that link moves.
		kmove := newLink(idle, "kmove", "https://example.com/kmove")
		kmove.Spec.Code = "mine"
		Expect(k8sClient.Create(suiteCtx, kmove)).To(Succeed())
		reconcileUntil("kmove", linkv1.StateActive)
		Expect(k8sClient.Create(suiteCtx, newLink(idle, "kyoung", "https://example.com/kyoung"))).To(Succeed())
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			l := getLink(Default, idle, "kyoung")
			l.Status.ObservedGeneration, l.Status.ConfirmedGeneration = l.Generation, l.Generation
			l.Status.Code, l.Status.CanonicalURL, l.Status.State = "pend2", "https://example.com/kyoung", linkv1.StateActive
			l.Status.Conditions = []metav1.Condition{{
				Type: linkv1.ConditionReady, Status: metav1.ConditionTrue, Reason: linkv1.ReasonCodeAssigned,
				Message: "set by the test", ObservedGeneration: l.Generation, LastTransitionTime: metav1.Now(),
			}}
			return k8sClient.Status().Update(suiteCtx, l)
		})).To(Succeed())
		setCode(idle, "kmove", "pend2")
		reconcileUntil("kmove", linkv1.StateKept)

		By("reading each link with kstatus and with the README's Argo CD check")
		for _, c := range []struct {
			ns, name   string
			kstatus    kstatus.Status
			argo       string
			argoSaying string
		}{
			{ns, "active", kstatus.CurrentStatus, "Healthy", "redirects to https://example.com/active"},
			{ns, "scheduled", kstatus.CurrentStatus, "Healthy", "redirects from " + later.UTC().Format(time.RFC3339)},
			{ns, "expired", kstatus.CurrentStatus, "Suspended", "answers 410 Gone"},
			{ns, "exhausted", kstatus.CurrentStatus, "Suspended", "answers 410 Gone"},
			{ns, "wanter", kstatus.FailedStatus, "Degraded", "waiting for the code to be released"},
			{ns, "kept", kstatus.FailedStatus, "Degraded", "choose another spec.code, or set it back to first"},
			{idle, "kmove", kstatus.InProgressStatus, "Progressing", `code pend2 is still held by younger ShortLink "kyoung"`},
			{ns, "invalid", kstatus.FailedStatus, "Degraded", "fix spec.url"},
			{idle, "older", kstatus.InProgressStatus, "Progressing", `still held by younger ShortLink "younger"`},
			{idle, "unobserved", kstatus.InProgressStatus, "Progressing", "Waiting for the controller"},
			{idle, "edited", kstatus.InProgressStatus, "Progressing", "Waiting for the controller"},
		} {
			u := liveLink(Default, c.ns, c.name)
			res, err := kstatus.Compute(u)
			Expect(err).NotTo(HaveOccurred())
			Expect(res.Status).To(Equal(c.kstatus), "kstatus of %s: %s", c.name, res.Message)

			health, msg, err := argoHealth(script, u)
			Expect(err).NotTo(HaveOccurred(), c.name)
			Expect(health).To(Equal(c.argo), "Argo CD health of %s: %s", c.name, msg)
			Expect(msg).To(ContainSubstring(c.argoSaying), c.name)
		}
	})
})
