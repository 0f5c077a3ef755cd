package uses

import (
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

// requestTimeout is a backstop for every request of the uses client: each
// call also has its own context, shorter on the request path.
const requestTimeout = 30 * time.Second

// NewClient returns the uncached client that reads and writes ShortLinks
// for counting. Its REST mapping of ShortLink is fixed: a client built with
// the default, discovering mapper asks the API server on its first use, in
// a call no context reaches, so the first request of a limited link waited
// as long as the API server did not answer, past --uses-reserve-timeout.
func NewClient(cfg *rest.Config, scheme *runtime.Scheme) (client.Client, error) {
	mapper := meta.NewDefaultRESTMapper(nil)
	mapper.Add(linkv1.GroupVersion.WithKind("ShortLink"), meta.RESTScopeNamespace)
	cfg = rest.CopyConfig(cfg)
	if cfg.Timeout == 0 {
		cfg.Timeout = requestTimeout
	}
	return client.New(cfg, client.Options{Scheme: scheme, Mapper: mapper})
}
