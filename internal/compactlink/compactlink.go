// Package compactlink keeps a ShortLink in the manager's informer cache in
// about a fifth of the memory the typed object takes (issue 57).
//
// A cached *linkv1.ShortLink costs about 1.1 KB a plain link: a 704-byte
// struct of mostly empty fields, its strings and slices. A Link keeps what
// the informer and the manager's event handlers read on every event (the
// Summary: name, namespace, resourceVersion, generation, codes, state) and
// the whole object packed: its JSON, deflated against a dictionary of
// typical links, about 100 bytes for a plain link.
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
	// labels are the object's labels, kept out of the packed form because
	// listers match selectors against every cached object's labels.
	labels map[string]string
	// packed is the object's JSON without the summary's metadata and the
	// labels, deflated against dictionary.
	packed []byte
}

// Pack returns the compact form of l. It keeps l's labels map and the
// strings of the summary, nothing else of l.
func Pack(l *linkv1.ShortLink) (*Link, error) {
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
	return &Link{Summary: SummaryOfLink(l), labels: l.Labels, packed: packed}, nil
}

// Unpack returns the ShortLink: a new object, the caller's own.
func (c *Link) Unpack() (*linkv1.ShortLink, error) {
	data, err := inflate(c.packed)
	if err != nil {
		return nil, fmt.Errorf("unpacking ShortLink %s/%s: %w", c.Namespace, c.Name, err)
	}
	l := &linkv1.ShortLink{}
	if err := sigsjson.UnmarshalCaseSensitivePreserveInts(data, l); err != nil {
		return nil, fmt.Errorf("unpacking ShortLink %s/%s: %w", c.Namespace, c.Name, err)
	}
	l.Name, l.Namespace, l.ResourceVersion, l.Generation = c.Name, c.Namespace, c.ResourceVersion, c.Generation
	l.Labels = maps.Clone(c.labels)
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

func (c *Link) GetNamespace() string              { return c.Namespace }
func (c *Link) GetName() string                   { return c.Name }
func (c *Link) GetResourceVersion() string        { return c.ResourceVersion }
func (c *Link) GetGeneration() int64              { return c.Generation }
func (c *Link) GetLabels() map[string]string      { return c.labels }
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

// writers are reused: a flate.Writer is about 700 KB, and a sync.Pool would
// drop them at every collection. One per packing goroutine at a time; more
// goroutines wait.
var writers = make(chan *flate.Writer, 4)

func deflate(data []byte) ([]byte, error) {
	var w *flate.Writer
	var buf bytes.Buffer
	select {
	case w = <-writers:
		w.Reset(&buf)
	default:
		var err error
		if w, err = flate.NewWriterDict(&buf, level, dictionary); err != nil {
			return nil, err
		}
	}
	defer func() {
		select {
		case writers <- w:
		default:
		}
	}()
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
