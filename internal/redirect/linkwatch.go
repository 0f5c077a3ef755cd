package redirect

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"time"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

// The redirector's ShortLink informers list and watch with a decoder of
// their own. client-go's decodes each watch event eight times over: its
// framer scans the stream, then the event and the embedded object are each
// sniffed for their kind, validated and decoded, every pass over every byte.
// At 100,000 links that was 8 of the redirector's 10-14 CPU-seconds of
// start, on the path that makes it ready (profiled). This decoder reads the
// stream once, token by token (github.com/go-json-experiment/json, the
// encoding/json/v2 proposal), and skips what no Link keeps (managedFields,
// labels, annotations, owners, conditions, use reservations) instead of
// building it. NewLink still makes the Link, so the rule is written once; a
// test checks that both decoders give every ShortLink the same Link.

// leanShortLink decodes a ShortLink with only what NewLink reads.
var leanShortLink = json.JoinOptions(decodeOptions, json.WithUnmarshalers(json.JoinUnmarshalers(
	skip[[]metav1.ManagedFieldsEntry](),
	skip[map[string]string](), // labels and annotations
	skip[[]metav1.OwnerReference](),
	skip[[]metav1.Condition](),
	json.UnmarshalFromFunc(anyReservations),
)))

// someReservations stands for a status.useReservations that is not empty
// and has no peer address: NewLink reads no more of it than that, so no
// such link allocates its own.
var someReservations = []linkv1.UseReservation{{}}

// markedReservation stands for reservations marked returnRequested.
var markedReservation = linkv1.UseReservation{ReturnRequested: true}

// anyReservations decodes status.useReservations as nil when it is null or
// empty, else as the one reservation forwardTo picks (its holder, peer and
// quota alone), or someReservations if none, and markedReservation after
// it if any is marked returnRequested.
func anyReservations(dec *jsontext.Decoder, v *[]linkv1.UseReservation) error {
	*v = nil
	if dec.PeekKind() != '[' {
		return dec.SkipValue()
	}
	if _, err := dec.ReadToken(); err != nil {
		return err
	}
	var best linkv1.UseReservation
	marked := false
	for dec.PeekKind() != ']' {
		var r struct {
			Holder          string `json:"holder"`
			PeerAddress     string `json:"peerAddress"`
			PeerProtocol    string `json:"peerProtocol"`
			Quota           int64  `json:"quota"`
			ReturnRequested bool   `json:"returnRequested"`
		}
		if err := json.UnmarshalDecode(dec, &r, decodeOptions); err != nil {
			return err
		}
		if c := (linkv1.UseReservation{Holder: r.Holder, PeerAddress: r.PeerAddress, PeerProtocol: r.PeerProtocol, Quota: r.Quota, ReturnRequested: r.ReturnRequested}); forwardsBefore(c, best) {
			best = c
		}
		marked = marked || r.ReturnRequested
		*v = someReservations
	}
	switch {
	case best.PeerAddress != "" && marked:
		*v = []linkv1.UseReservation{best, markedReservation}
	case best.PeerAddress != "":
		*v = []linkv1.UseReservation{best}
	case marked:
		*v = []linkv1.UseReservation{markedReservation}
	}
	_, err := dec.ReadToken()
	return err
}

// decodeOptions are encoding/json's leniencies, which client-go's decoder
// has too: repeated names (the last wins) and invalid UTF-8 (replaced).
var decodeOptions = json.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

func skip[T any]() *json.Unmarshalers {
	return json.UnmarshalFromFunc(func(dec *jsontext.Decoder, _ *T) error { return dec.SkipValue() })
}

// newLinkInformer is an informer on the ShortLinks of namespace (all if
// empty) that holds Links (see linkListWatch).
func newLinkInformer(c rest.Interface, namespace string) (toolscache.SharedIndexInformer, error) {
	inf := toolscache.NewSharedIndexInformerWithOptions(newLinkListWatch(c, namespace),
		&linkv1.ShortLink{}, toolscache.SharedIndexInformerOptions{})
	// Watch events carry ShortLinks; lists are Links already.
	if err := inf.SetTransform(TransformShortLink); err != nil {
		return nil, err
	}
	return inf, nil
}

// linkRESTClient is a REST client for ShortLinks over JSON; its own codecs
// encode the query parameters and decode error responses.
func linkRESTClient(cfg *rest.Config, hc *http.Client) (*rest.RESTClient, error) {
	scheme := runtime.NewScheme()
	if err := linkv1.AddToScheme(scheme); err != nil {
		return nil, err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.GroupVersion = &linkv1.GroupVersion
	cfg.APIPath = "/apis"
	cfg.ContentType = runtime.ContentTypeJSON
	cfg.AcceptContentTypes = runtime.ContentTypeJSON
	cfg.NegotiatedSerializer = serializer.NewCodecFactory(scheme).WithoutConversion()
	if hc == nil {
		return rest.RESTClientFor(cfg)
	}
	return rest.RESTClientForConfigAndClient(cfg, hc)
}

// linkListWatch lists and watches ShortLinks with the one-pass decoder.
//
// Its informer syncs by a LIST, then a WATCH, not by a streaming list
// (WatchList): at 100,000 links the API server spent about 12 CPU-seconds
// streaming them as watch events (a deep copy and an encoder round per
// object), and the redirector was ready in 12-15 s, against 6.3-7.8 s with
// a LIST (hack/bench-scale, and restarts against one held control plane).
// The reflector's first LIST (resourceVersion 0) is served whole from the
// API server's watch cache. What made a LIST costly
// before was client-go's reading of it: the whole response in memory, then
// every object decoded whole (559 MiB at 100,000 links). This one decodes
// the response as it arrives and makes each item a Link at once, so the
// list never exists as ShortLinks.
type linkListWatch struct {
	toolscache.ListWatch
	client    rest.Interface
	namespace string
}

func newLinkListWatch(c rest.Interface, namespace string) *linkListWatch {
	lw := &linkListWatch{client: c, namespace: namespace}
	lw.ListWithContextFunc, lw.WatchFuncWithContext = lw.list, lw.watch
	return lw
}

// IsWatchListSemanticsUnSupported tells client-go's reflector to list, then
// watch, instead of a streaming list.
func (*linkListWatch) IsWatchListSemanticsUnSupported() bool { return true }

func (lw *linkListWatch) request(opts *metav1.ListOptions) *rest.Request {
	return lw.client.Get().Namespace(lw.namespace).Resource("shortlinks").VersionedParams(opts, metav1.ParameterCodec)
}

// list reads a LIST (or a page of one) as it arrives.
func (lw *linkListWatch) list(ctx context.Context, opts metav1.ListOptions) (runtime.Object, error) {
	body, err := openStream(ctx, lw.request(&opts))
	if err != nil {
		return nil, err
	}
	defer func() { _ = body.Close() }()
	list, err := decodeLinkList(jsontext.NewDecoder(body, decodeOptions))
	if err != nil {
		return nil, fmt.Errorf("decoding the list of ShortLinks: %w", err)
	}
	// Read to the end (a newline), so that an HTTP/1.1 connection is reused.
	_, _ = io.Copy(io.Discard, io.LimitReader(body, 1<<10))
	return list, nil
}

// openRetries is how often opening a list or a watch is retried after a
// connection closed or timed out before the response, once a second, as
// client-go's Request.Watch and Request.Do do (Request.Stream does not).
const openRetries = 10

// openStream sends req and returns the response body, retrying when the
// connection closed or timed out before a response. (Stream also passes
// the client's rate limiter, which Request.Watch skips; the redirector's
// has none: controller-runtime's GetConfig sets QPS -1.)
func openStream(ctx context.Context, req *rest.Request) (io.ReadCloser, error) {
	for attempt := 0; ; attempt++ {
		body, err := req.Stream(ctx)
		transient := utilnet.IsProbableEOF(err) || utilnet.IsTimeout(err)
		if err == nil || !transient || attempt == openRetries {
			return body, err
		}
		select {
		case <-ctx.Done():
			return nil, err
		case <-time.After(time.Second):
		}
	}
}

// linkList is a list of ShortLinks made Links as they were read.
type linkList struct {
	metav1.TypeMeta
	metav1.ListMeta
	Items []*Link
}

// DeepCopyObject copies the list (Links are immutable, so they are shared).
func (l *linkList) DeepCopyObject() runtime.Object {
	c := *l
	l.DeepCopyInto(&c.ListMeta)
	c.Items = slices.Clone(l.Items)
	return &c
}

// decodeLinkList reads a ShortLinkList, making each item a Link (NewLink)
// as soon as it is read.
func decodeLinkList(dec *jsontext.Decoder) (*linkList, error) {
	list := &linkList{}
	if err := expect(dec, '{'); err != nil {
		return nil, err
	}
	for dec.PeekKind() == '"' {
		name, err := dec.ReadToken()
		if err != nil {
			return nil, err
		}
		switch name.String() {
		case "metadata":
			err = json.UnmarshalDecode(dec, &list.ListMeta, decodeOptions)
		case "items":
			if dec.PeekKind() == 'n' { // null: no items
				_, err = dec.ReadToken()
				break
			}
			if err = expect(dec, '['); err != nil {
				break
			}
			for dec.PeekKind() == '{' {
				var item linkv1.ShortLink
				if err = json.UnmarshalDecode(dec, &item, leanShortLink); err != nil {
					return nil, fmt.Errorf("item %d: %w", len(list.Items), err)
				}
				list.Items = append(list.Items, NewLink(&item))
			}
			err = expect(dec, ']')
		default:
			err = dec.SkipValue()
		}
		if err != nil {
			return nil, err
		}
	}
	return list, expect(dec, '}')
}

// expect reads the next token, which must be the delimiter kind.
func expect(dec *jsontext.Decoder, kind jsontext.Kind) error {
	tok, err := dec.ReadToken()
	if err != nil {
		return err
	}
	if tok.Kind() != kind {
		return fmt.Errorf("want %s, got %s", kind, tok.Kind())
	}
	return nil
}

func (lw *linkListWatch) watch(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
	opts.Watch = true
	body, err := openStream(ctx, lw.request(&opts))
	if err != nil {
		return nil, err
	}
	return watch.NewStreamWatcher(newLinkEvents(body),
		apierrors.NewClientErrorReporter(http.StatusInternalServerError, http.MethodGet, "ClientWatchDecoding")), nil
}

// linkEvents decodes a watch stream of ShortLinks: one JSON object
// {"type": ..., "object": ...} per event.
type linkEvents struct {
	body io.ReadCloser
	dec  *jsontext.Decoder
}

func newLinkEvents(body io.ReadCloser) *linkEvents {
	return &linkEvents{body: body, dec: jsontext.NewDecoder(body, decodeOptions)}
}

// Decode returns the next event; io.EOF when the stream ends between events,
// as watch.StreamWatcher expects.
func (d *linkEvents) Decode() (watch.EventType, runtime.Object, error) {
	tok, err := d.dec.ReadToken()
	if err != nil {
		if err == io.EOF {
			return "", nil, io.EOF
		}
		return "", nil, streamError(err)
	}
	if tok.Kind() != '{' {
		return "", nil, fmt.Errorf("watch event: want a JSON object, got %s", tok.Kind())
	}
	var (
		typ watch.EventType
		obj runtime.Object
		raw jsontext.Value // the object, if it came before the type
	)
	for d.dec.PeekKind() == '"' {
		name, err := d.dec.ReadToken()
		if err != nil {
			return "", nil, streamError(err)
		}
		switch name.String() {
		case "type":
			t, err := d.dec.ReadToken()
			if err != nil {
				return "", nil, streamError(err)
			}
			if t.Kind() != '"' {
				return "", nil, fmt.Errorf("watch event: type is %s, not a string", t.Kind())
			}
			typ = watch.EventType(t.String())
		case "object":
			if typ == "" {
				if raw, err = d.dec.ReadValue(); err != nil {
					return "", nil, streamError(err)
				}
				raw = raw.Clone()
				continue
			}
			if obj, err = decodeEventObject(typ, d.dec); err != nil {
				return "", nil, err
			}
		default:
			if err := d.dec.SkipValue(); err != nil {
				return "", nil, streamError(err)
			}
		}
	}
	if _, err := d.dec.ReadToken(); err != nil { // the closing brace
		return "", nil, streamError(err)
	}
	if obj == nil && raw != nil {
		if obj, err = decodeEventObject(typ, jsontext.NewDecoder(bytes.NewReader(raw), decodeOptions)); err != nil {
			return "", nil, err
		}
	}
	if obj == nil {
		return "", nil, fmt.Errorf("watch event %q without an object", typ)
	}
	return typ, obj, nil
}

// decodeEventObject decodes the object of an event of type typ: a Status
// for an error, the whole object for a bookmark (its annotations mark the
// end of the initial events), a lean ShortLink otherwise.
func decodeEventObject(typ watch.EventType, dec *jsontext.Decoder) (runtime.Object, error) {
	var obj runtime.Object
	opts := leanShortLink
	switch typ {
	case watch.Added, watch.Modified, watch.Deleted:
		obj = &linkv1.ShortLink{}
	case watch.Bookmark:
		obj, opts = &linkv1.ShortLink{}, decodeOptions
	case watch.Error:
		obj, opts = &metav1.Status{}, decodeOptions
	default:
		return nil, fmt.Errorf("watch event of unknown type %q", typ)
	}
	if err := json.UnmarshalDecode(dec, obj, opts); err != nil {
		return nil, streamError(fmt.Errorf("watch event %s: %w", typ, err))
	}
	return obj, nil
}

// streamError makes a stream cut off inside an event io.ErrUnexpectedEOF,
// which watch.StreamWatcher ends the watch on quietly (the reflector then
// watches again from the last resourceVersion it saw).
func streamError(err error) error {
	if errors.Is(err, io.ErrUnexpectedEOF) || errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Close ends the stream.
func (d *linkEvents) Close() { _ = d.body.Close() }
