// Package compactlink keeps a ShortLink in the manager's informer cache in
// about a fifth of the memory the typed object takes (issue 57).
//
// A cached *linkv1.ShortLink costs about 1.1 KB a plain link: a 704-byte
// struct of mostly empty fields, its strings and slices. A Link keeps what
// the informer and the manager's event handlers read on every event (the
// Summary: name, namespace, resourceVersion, generation, codes, state) and
// the whole object packed: its JSON, deflated against a dictionary of
// typical links, about 150 bytes for a plain link. A link that its JSON
// would not give back exactly (a time with a fraction of a second, or a set
// time of year 1, which metav1.Time writes in whole seconds or as null) is
// kept as it is.
//
// A Link is a runtime.Object and a metav1.Object, so client-go's informer
// stores it and controller-runtime's cache serves it: its DeepCopyObject
// returns the unpacked *linkv1.ShortLink, which is the copy the cache
// reader hands to a Get or List. A caller never sees a Link through the
// client; handlers and index functions, which see the informer's objects
// as they are, read them with Of or SummaryOf.
package compactlink

import (
	"bytes"
	"compress/flate"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"reflect"
	goruntime "runtime"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	sigsjson "sigs.k8s.io/json"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

// Summary is what a Link answers without unpacking: the metadata the
// informer's store and event handlers read on every event, and the fields
// the code index and its handlers look links up by.
type Summary struct {
	Namespace, Name     string
	ResourceVersion     string
	Generation          int64
	SpecCode            string
	StatusCode          string
	State               linkv1.LinkState
	ConfirmedGeneration int64
}

// SummaryOfLink is the Summary of a ShortLink.
func SummaryOfLink(l *linkv1.ShortLink) Summary {
	return Summary{
		Namespace: l.Namespace, Name: l.Name, ResourceVersion: l.ResourceVersion, Generation: l.Generation,
		SpecCode: l.Spec.Code, StatusCode: l.Status.Code, State: l.Status.State, ConfirmedGeneration: l.Status.ConfirmedGeneration,
	}
}

// HoldsConfirmedCode is linkv1.ShortLink's, read from the summary.
func (s *Summary) HoldsConfirmedCode() bool {
	return s.StatusCode != "" && s.ConfirmedGeneration > 0
}

// Link is a ShortLink as the manager's cache keeps it. Read only: its
// setters panic.
type Link struct {
	Summary
	// rare is what few links have: nil for most.
	rare *rare
	// packed is the object's JSON without the summary's metadata and the
	// labels, deflated against dictionary; nil for a link kept exact.
	packed []byte
}

type rare struct {
	// labels are the object's labels (the manager keeps only the GitOps
	// ones), kept out of the packed form because listers match selectors
	// against every cached object's labels.
	labels map[string]string
	// exact is a link that JSON would not give back exactly, kept as is.
	exact *linkv1.ShortLink
}

// Pack returns the compact form of l. It keeps l's labels map and the
// strings of the summary, nothing else of l; or l itself, if its JSON would
// not give it back exactly.
func Pack(l *linkv1.ShortLink) (*Link, error) {
	if !exactInJSON(reflect.ValueOf(l).Elem()) {
		return &Link{Summary: SummaryOfLink(l), rare: &rare{labels: l.Labels, exact: l}}, nil
	}
	// The summary's metadata and the labels are kept beside the packed form,
	// not twice.
	rest := *l
	rest.Name, rest.Namespace, rest.ResourceVersion, rest.Generation, rest.Labels = "", "", "", 0, nil
	data, err := json.Marshal(&rest)
	if err != nil {
		return nil, fmt.Errorf("packing ShortLink %s/%s: %w", l.Namespace, l.Name, err)
	}
	packed, err := deflate(data)
	if err != nil {
		return nil, fmt.Errorf("packing ShortLink %s/%s: %w", l.Namespace, l.Name, err)
	}
	c := &Link{Summary: SummaryOfLink(l), packed: packed}
	if l.Labels != nil {
		c.rare = &rare{labels: l.Labels}
	}
	return c, nil
}

// Unpack returns the ShortLink: a new object, the caller's own.
func (c *Link) Unpack() (*linkv1.ShortLink, error) {
	if c.rare != nil && c.rare.exact != nil {
		return c.rare.exact.DeepCopy(), nil
	}
	data, err := inflate(c.packed)
	if err != nil {
		return nil, fmt.Errorf("unpacking ShortLink %s/%s: %w", c.Namespace, c.Name, err)
	}
	l := &linkv1.ShortLink{}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, l); err != nil {
		return nil, fmt.Errorf("unpacking ShortLink %s/%s: %w", c.Namespace, c.Name, err)
	}
	l.Name, l.Namespace, l.ResourceVersion, l.Generation = c.Name, c.Namespace, c.ResourceVersion, c.Generation
	l.Labels = maps.Clone(c.GetLabels())
	return l, nil
}

// PackedSize is how many bytes the packed form takes (for the accounting
// of issue 57: not counting the Link itself).
func (c *Link) PackedSize() int { return len(c.packed) }

// mustUnpack is for the interfaces that cannot return an error. The packed
// form is this package's own JSON of an object that was marshaled a moment
// before: failing to read it back is a bug, not an input to handle.
func (c *Link) mustUnpack() *linkv1.ShortLink {
	l, err := c.Unpack()
	if err != nil {
		panic(err)
	}
	return l
}

// Of returns the ShortLink obj is or holds: obj itself for a
// *linkv1.ShortLink, the unpacked copy for a *Link. ok is false for any
// other type.
func Of(obj any) (l *linkv1.ShortLink, ok bool) {
	switch o := obj.(type) {
	case *linkv1.ShortLink:
		return o, true
	case *Link:
		return o.mustUnpack(), true
	}
	return nil, false
}

// SummaryOf returns the Summary of a *linkv1.ShortLink or a *Link, without
// unpacking; ok is false for any other type.
func SummaryOf(obj any) (s Summary, ok bool) {
	switch o := obj.(type) {
	case *linkv1.ShortLink:
		return SummaryOfLink(o), true
	case *Link:
		return o.Summary, true
	}
	return Summary{}, false
}

// runtime.Object.

// GetObjectKind is empty: the cache reader sets the kind on the copies it
// returns.
func (c *Link) GetObjectKind() schema.ObjectKind { return schema.EmptyObjectKind }

// DeepCopyObject returns the unpacked *linkv1.ShortLink, not a Link: it is
// how controller-runtime's cache reader copies a cached object into the
// ShortLink a Get or a List asked for.
func (c *Link) DeepCopyObject() runtime.Object { return c.mustUnpack() }

// metav1.Object: the summary's fields and the labels are read as they are,
// the rest (rarely read) from the unpacked object. The setters panic: the
// cache's objects are read only, and a Link is never written.

func (c *Link) GetNamespace() string       { return c.Namespace }
func (c *Link) GetName() string            { return c.Name }
func (c *Link) GetResourceVersion() string { return c.ResourceVersion }
func (c *Link) GetGeneration() int64       { return c.Generation }
func (c *Link) GetLabels() map[string]string {
	if c.rare == nil {
		return nil
	}
	return c.rare.labels
}
func (c *Link) GetGenerateName() string           { return c.mustUnpack().GenerateName }
func (c *Link) GetUID() types.UID                 { return c.mustUnpack().UID }
func (c *Link) GetSelfLink() string               { return "" } // deprecated, never set
func (c *Link) GetCreationTimestamp() metav1.Time { return c.mustUnpack().CreationTimestamp }
func (c *Link) GetDeletionTimestamp() *metav1.Time {
	return c.mustUnpack().DeletionTimestamp
}
func (c *Link) GetDeletionGracePeriodSeconds() *int64 {
	return c.mustUnpack().DeletionGracePeriodSeconds
}
func (c *Link) GetAnnotations() map[string]string { return c.mustUnpack().Annotations }
func (c *Link) GetFinalizers() []string           { return c.mustUnpack().Finalizers }
func (c *Link) GetOwnerReferences() []metav1.OwnerReference {
	return c.mustUnpack().OwnerReferences
}
func (c *Link) GetManagedFields() []metav1.ManagedFieldsEntry {
	return c.mustUnpack().ManagedFields
}

func readOnly(field string) {
	panic("compactlink.Link is a cached object, read only: set " + field + " on the ShortLink DeepCopyObject returns")
}

func (c *Link) SetNamespace(string)                          { readOnly("namespace") }
func (c *Link) SetName(string)                               { readOnly("name") }
func (c *Link) SetGenerateName(string)                       { readOnly("generateName") }
func (c *Link) SetUID(types.UID)                             { readOnly("uid") }
func (c *Link) SetResourceVersion(string)                    { readOnly("resourceVersion") }
func (c *Link) SetGeneration(int64)                          { readOnly("generation") }
func (c *Link) SetSelfLink(string)                           { readOnly("selfLink") }
func (c *Link) SetCreationTimestamp(metav1.Time)             { readOnly("creationTimestamp") }
func (c *Link) SetDeletionTimestamp(*metav1.Time)            { readOnly("deletionTimestamp") }
func (c *Link) SetDeletionGracePeriodSeconds(*int64)         { readOnly("deletionGracePeriodSeconds") }
func (c *Link) SetLabels(map[string]string)                  { readOnly("labels") }
func (c *Link) SetAnnotations(map[string]string)             { readOnly("annotations") }
func (c *Link) SetFinalizers([]string)                       { readOnly("finalizers") }
func (c *Link) SetOwnerReferences([]metav1.OwnerReference)   { readOnly("ownerReferences") }
func (c *Link) SetManagedFields([]metav1.ManagedFieldsEntry) { readOnly("managedFields") }

var (
	_ runtime.Object = (*Link)(nil)
	_ metav1.Object  = (*Link)(nil)
)

// level 2 is the fastest level that uses the dictionary (BestSpeed ignores
// it) and packs a plain link as small as the default level does.
const level = 2

// writers are reused: a flate.Writer is about 770 KB, and a sync.Pool would
// drop them at every collection. There are as many as CPUs, made when first
// needed (nil until then); a packing goroutine waits for one.
var writers = func() chan *flate.Writer {
	ch := make(chan *flate.Writer, goruntime.GOMAXPROCS(0))
	for range cap(ch) {
		ch <- nil
	}
	return ch
}()

func deflate(data []byte) ([]byte, error) {
	var buf bytes.Buffer
	w := <-writers
	defer func() { writers <- w }()
	if w == nil {
		var err error
		if w, err = flate.NewWriterDict(&buf, level, dictionary); err != nil {
			return nil, err
		}
	} else {
		w.Reset(&buf)
	}
	if _, err := w.Write(data); err != nil {
		return nil, err
	}
	if err := w.Close(); err != nil {
		return nil, err
	}
	// A slice of its own length: the buffer's spare capacity would be kept
	// with every cached link.
	return bytes.Clone(buf.Bytes()), nil
}

var readers = sync.Pool{New: func() any { return flate.NewReaderDict(nil, dictionary) }}

func inflate(packed []byte) ([]byte, error) {
	r := readers.Get().(io.ReadCloser)
	defer readers.Put(r)
	if err := r.(flate.Resetter).Reset(bytes.NewReader(packed), dictionary); err != nil {
		return nil, err
	}
	var out bytes.Buffer
	out.Grow(8 * len(packed))
	if _, err := out.ReadFrom(r); err != nil {
		return nil, err
	}
	return out.Bytes(), nil
}

var (
	timeType      = reflect.TypeFor[metav1.Time]()
	microTimeType = reflect.TypeFor[metav1.MicroTime]()
)

// exactInJSON says whether v's JSON gives it back exactly: metav1.Time is
// written in whole seconds and MicroTime in microseconds, and either as
// null when zero, which a pointer reads back as nil. The API server keeps a
// custom resource's JSON as it was sent, so a spec.expiresAt with a
// fraction of a second is possible, if rare.
func exactInJSON(v reflect.Value) bool {
	// v is addressable (Pack walks *l): its address boxes without a copy.
	switch v.Type() {
	case timeType:
		return v.Addr().Interface().(*metav1.Time).Nanosecond() == 0
	case microTimeType:
		return v.Addr().Interface().(*metav1.MicroTime).Nanosecond()%1000 == 0
	}
	switch v.Kind() {
	case reflect.Pointer:
		if v.IsNil() {
			return true
		}
		// A set zero time: null in JSON, nil when read back. (Its location
		// is set, so only the time's own IsZero says so.)
		switch t := v.Interface().(type) {
		case *metav1.Time:
			if t.IsZero() {
				return false
			}
		case *metav1.MicroTime:
			if t.IsZero() {
				return false
			}
		}
		return exactInJSON(v.Elem())
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() && !exactInJSON(v.Field(i)) {
				return false
			}
		}
	case reflect.Slice:
		for i := range v.Len() {
			if !exactInJSON(v.Index(i)) {
				return false
			}
		}
	}
	return true
}
