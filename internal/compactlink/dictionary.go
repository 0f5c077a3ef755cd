package compactlink

import (
	"encoding/json"
	"fmt"
	"reflect"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
)

// dictionary is what every packed link is deflated against: deflate finds
// in it the JSON keys, the common values and the shape of typical links, so
// that a link's packed form is little more than what is its own (name,
// uid, URL, code, times). It is built from the API types, so a new field's
// key is in it without a change here; deflate prefers the nearest matches,
// so the most common link comes last.
var dictionary = buildDictionary()

func buildDictionary() []byte {
	var dict []byte
	add := func(l *linkv1.ShortLink) {
		data, err := json.Marshal(l)
		if err != nil {
			panic(err)
		}
		dict = append(dict, data...)
	}
	// Metadata is left out: the manager's cache keeps little of it (and
	// managedFields' raw JSON has no sample value).
	every := sampleLink("Active", "", nil)
	fill(reflect.ValueOf(&every.Spec).Elem())
	fill(reflect.ValueOf(&every.Status).Elem())
	add(every)
	add(sampleLink("Exhausted", "code 4kQ2Wb7xNz answered all 10 of its uses (spec.maxUses) and answers 410 Gone", func(l *linkv1.ShortLink) {
		l.Spec.MaxUses = ptr(int64(10))
		l.Status.Uses = 10
		l.Status.FinishedAt = &l.CreationTimestamp
		l.Status.LastUsedAt = &l.CreationTimestamp
		l.Status.UseReservations = []linkv1.UseReservation{{Holder: "linkforge-redirector-7d9f8b6c5d-x2k4p", Quota: 4, ExpiresAt: metav1.NewMicroTime(l.CreationTimestamp.Time),
			Peer: "linkforge-redirector-7d9f8b6c5d-x2k4p", PeerAddress: "10.244.0.17:8443", PeerProtocol: "v1"}}
	}))
	add(sampleLink("Expired", "code 4kQ2Wb7xNz expired at 2026-11-29T10:27:41Z and answers 410 Gone", func(l *linkv1.ShortLink) {
		l.Spec.TTL = &metav1.Duration{Duration: time.Hour}
		l.Status.ExpiresAt = &l.CreationTimestamp
	}))
	add(sampleLink("Active", "code 4kQ2Wb7xNz redirects to https://example.com/articles/2026/11/welcome?utm_source=newsletter&utm_medium=email with 302 Found", nil))
	return dict
}

func sampleLink(state linkv1.LinkState, message string, change func(*linkv1.ShortLink)) *linkv1.ShortLink {
	at := metav1.NewTime(time.Date(2026, 11, 29, 10, 27, 41, 0, time.UTC))
	l := &linkv1.ShortLink{
		TypeMeta:   metav1.TypeMeta{APIVersion: linkv1.GroupVersion.String(), Kind: "ShortLink"},
		ObjectMeta: metav1.ObjectMeta{UID: "0b5e3c1a-7d2f-4e8b-9a6c-5f4d3e2c1b0a", CreationTimestamp: at},
		Spec:       linkv1.ShortLinkSpec{URL: "https://example.com/articles/2026/11/welcome?utm_source=newsletter&utm_medium=email"},
		Status: linkv1.ShortLinkStatus{
			ObservedGeneration: 1, State: state, Code: "4kQ2Wb7xNz", ConfirmedGeneration: 1,
			CanonicalURL: "https://example.com/articles/2026/11/welcome?utm_medium=email&utm_source=newsletter",
			ShortURL:     "https://go.example.com/team-a/4kQ2Wb7xNz",
			Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, ObservedGeneration: 1,
				LastTransitionTime: at, Reason: string(state), Message: message}},
		},
	}
	if change != nil {
		change(l)
	}
	return l
}

func ptr[T any](v T) *T { return &v }

// fill sets every field of v to a value that is not empty, so that its JSON
// has every key (one element of each slice, each pointer set).
func fill(v reflect.Value) {
	switch v.Interface().(type) {
	case metav1.Time:
		v.Set(reflect.ValueOf(metav1.NewTime(time.Date(2026, 11, 29, 10, 27, 41, 0, time.UTC))))
		return
	case metav1.MicroTime:
		v.Set(reflect.ValueOf(metav1.NewMicroTime(time.Date(2026, 11, 29, 10, 27, 41, 123456000, time.UTC))))
		return
	case metav1.Duration:
		v.Set(reflect.ValueOf(metav1.Duration{Duration: time.Hour}))
		return
	}
	switch v.Kind() {
	case reflect.Struct:
		for i := range v.NumField() {
			if v.Type().Field(i).IsExported() {
				fill(v.Field(i))
			}
		}
	case reflect.Pointer:
		v.Set(reflect.New(v.Type().Elem()))
		fill(v.Elem())
	case reflect.Slice:
		v.Set(reflect.MakeSlice(v.Type(), 1, 1))
		fill(v.Index(0))
	case reflect.Map:
		v.Set(reflect.MakeMap(v.Type()))
		k, e := reflect.New(v.Type().Key()).Elem(), reflect.New(v.Type().Elem()).Elem()
		fill(k)
		fill(e)
		v.SetMapIndex(k, e)
	case reflect.String:
		v.SetString("x")
	case reflect.Bool:
		v.SetBool(true)
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		v.SetInt(1)
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		v.SetUint(1)
	case reflect.Float32, reflect.Float64:
		v.SetFloat(1)
	case reflect.Interface:
	default:
		panic(fmt.Sprintf("compactlink: no sample value for %s", v.Type()))
	}
}
