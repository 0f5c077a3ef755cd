package v1alpha1

import (
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestIdleDeadline(t *testing.T) {
	created := time.Date(2026, 11, 1, 9, 0, 0, 0, time.UTC)
	at := func(d time.Duration) *metav1.Time { t := metav1.NewTime(created.Add(d)); return &t }
	idle := &metav1.Duration{Duration: time.Hour}
	const grace = 30 * time.Second
	for name, tc := range map[string]struct {
		idle        *metav1.Duration
		activatesAt *metav1.Time
		lastUsedAt  *metav1.Time
		grace       time.Duration
		want        time.Duration // from creation
		ok          bool
	}{
		"no idleTimeout: never":                  {lastUsedAt: at(time.Minute)},
		"never used: from creation":              {idle: idle, grace: grace, want: time.Hour + grace, ok: true},
		"used: from the last use":                {idle: idle, lastUsedAt: at(10 * time.Minute), grace: grace, want: 70*time.Minute + grace, ok: true},
		"activates later: from activation":       {idle: idle, activatesAt: at(2 * time.Hour), want: 3 * time.Hour, ok: true},
		"activated in the past: from creation":   {idle: idle, activatesAt: at(-time.Hour), want: time.Hour, ok: true},
		"used after activation: from the use":    {idle: idle, activatesAt: at(time.Hour), lastUsedAt: at(90 * time.Minute), want: 150 * time.Minute, ok: true},
		"a use before activation (old) ignored":  {idle: idle, activatesAt: at(time.Hour), lastUsedAt: at(time.Minute), want: 2 * time.Hour, ok: true},
		"lastUsedAt before creation (recreated)": {idle: idle, lastUsedAt: at(-time.Hour), want: time.Hour, ok: true},
		"negative grace counts as none":          {idle: idle, grace: -time.Minute, want: time.Hour, ok: true},
	} {
		t.Run(name, func(t *testing.T) {
			l := &ShortLink{ObjectMeta: metav1.ObjectMeta{CreationTimestamp: metav1.NewTime(created)}}
			l.Spec.IdleTimeout, l.Spec.ActivatesAt, l.Status.LastUsedAt = tc.idle, tc.activatesAt, tc.lastUsedAt
			got, ok := l.IdleDeadline(tc.grace)
			if ok != tc.ok {
				t.Fatalf("ok = %v, want %v", ok, tc.ok)
			}
			if ok && !got.Equal(created.Add(tc.want)) {
				t.Errorf("deadline = %s, want creation + %s", got, tc.want)
			}
		})
	}
}
