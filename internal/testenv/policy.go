package testenv

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/wait"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"
)

// DestinationPolicy returns the objects of the kustomize component
// config/destination-policy, as shipped (without config/default's name
// prefix): the ValidatingAdmissionPolicies and their bindings, in the order
// of its kustomization.
func DestinationPolicy(root string) ([]*unstructured.Unstructured, error) {
	dir := filepath.Join(root, "config", "destination-policy")
	b, err := os.ReadFile(filepath.Join(dir, "kustomization.yaml"))
	if err != nil {
		return nil, err
	}
	var k struct {
		Resources []string `json:"resources"`
	}
	if err := yaml.Unmarshal(b, &k); err != nil {
		return nil, fmt.Errorf("%s/kustomization.yaml: %w", dir, err)
	}
	var out []*unstructured.Unstructured
	for _, r := range k.Resources {
		b, err := os.ReadFile(filepath.Join(dir, r))
		if err != nil {
			return nil, err
		}
		u := &unstructured.Unstructured{}
		if err := yaml.Unmarshal(b, &u.Object); err != nil {
			return nil, fmt.Errorf("%s: %w", r, err)
		}
		out = append(out, u)
	}
	return out, nil
}

// Names of the objects the probe of InstallDestinationPolicy creates. The
// namespace's is a prefix: a deleted namespace stays Terminating where no
// namespace controller runs (envtest), so each install makes a new one.
const (
	probeNamespacePrefix = "linkforge-policy-probe-"
	probeDenyList        = "linkforge-policy-probe"
)

// InstallDestinationPolicy creates the objects of config/destination-policy
// and waits until the API server enforces all three policies: a policy takes
// a moment to be loaded, and the deny-list policy's parameters and a
// namespace's annotation reach it through informers. It probes with a
// namespace and a DestinationDenyList of its own (hosts under
// policy-probe.example) and dry-run requests. remove deletes what it created.
func InstallDestinationPolicy(ctx context.Context, c client.Client, root string, timeout time.Duration) (remove func(context.Context) error, err error) {
	objs, err := DestinationPolicy(root)
	if err != nil {
		return nil, err
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		GenerateName: probeNamespacePrefix,
		Annotations:  map[string]string{"linkforge.io/allowed-hosts": "*.policy-probe.example"},
	}}
	deny := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "linkforge.io/v1alpha1", "kind": "DestinationDenyList",
		"metadata": map[string]any{"name": probeDenyList},
		"spec":     map[string]any{"hosts": []any{"denied.policy-probe.example"}},
	}}
	created := []client.Object{ns, deny}
	remove = func(ctx context.Context) error {
		var errs []error
		for i := len(created) - 1; i >= 0; i-- {
			if err := c.Delete(ctx, created[i]); err != nil && !apierrors.IsNotFound(err) {
				errs = append(errs, err)
			}
		}
		return errors.Join(errs...)
	}
	for _, o := range objs {
		created = append(created, o)
	}
	for _, o := range created {
		if err := c.Create(ctx, o); err != nil {
			return nil, errors.Join(fmt.Errorf("creating %s %s: %w", o.GetObjectKind().GroupVersionKind().Kind, o.GetName(), err), remove(ctx))
		}
	}

	refused := func(url, want string) error {
		link := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "linkforge.io/v1alpha1", "kind": "ShortLink",
			"metadata": map[string]any{"generateName": "probe-", "namespace": ns.Name},
			"spec":     map[string]any{"url": url},
		}}
		err := c.Create(ctx, link, client.DryRunAll)
		if err == nil || !strings.Contains(err.Error(), want) {
			return fmt.Errorf("a ShortLink to %s: %v, want a refusal with %q", url, err, want)
		}
		return nil
	}
	var last error
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, timeout, true, func(ctx context.Context) (bool, error) {
		last = errors.Join(
			refused("https://elsewhere.example/", "is not allowed in namespace "+ns.Name),
			refused("https://denied.policy-probe.example/", `DestinationDenyList "`+probeDenyList+`"`),
		)
		if last != nil {
			return false, nil
		}
		bad := ns.DeepCopy()
		bad.Annotations["linkforge.io/allowed-hosts"] = "https://policy-probe.example"
		if err := c.Update(ctx, bad, client.DryRunAll); err == nil || !strings.Contains(err.Error(), "is not a host pattern") {
			last = fmt.Errorf("a bad linkforge.io/allowed-hosts annotation: %v", err)
			return false, nil
		}
		return true, nil
	})
	if err != nil {
		return nil, errors.Join(fmt.Errorf("the destination policy is not enforced after %s: %w", timeout, last), remove(ctx))
	}
	return remove, nil
}
