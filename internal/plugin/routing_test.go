package plugin

import (
	"testing"
)

func TestCreateTakesRulesAndVariants(t *testing.T) {
	freshNamespaces(t)
	args := []string{"create", "app", "https://example.com/app", "--dry-run=client",
		"--rule", "url=https://apps.apple.com/app/id1 device=ios",
		"--rule", "url=https://play.google.com/store/apps/details?id=x device=android",
		"--rule", "url=https://example.de/ language=de,de-AT",
		"--rule", "url=https://example.com/beta query=beta=1 query=ref header=X-Canary=yes after=2030-01-01T00:00:00Z before=2030-02-01T00:00:00Z country=CH,LI",
		"--variant", "url=https://example.com/app-b weight=30",
		"--variant", "url=https://example.com/app-c weight=20%",
		"--variants-end", "at=2030-03-01T00:00:00+01:00 url=https://example.com/app-b",
		"--expired-url", "https://example.com/over", "--forward-path"}
	res := runVerb(t, "", args[0], args[1:]...)
	res.expect(t, ExitOK, `apiVersion: linkforge.io/v1alpha1
kind: ShortLink
metadata:
  name: app
spec:
  expiredURL: https://example.com/over
  forwardPath: true
  rules:
  - devices:
    - ios
    url: https://apps.apple.com/app/id1
  - devices:
    - android
    url: https://play.google.com/store/apps/details?id=x
  - languages:
    - de
    - de-AT
    url: https://example.de/
  - after: "2030-01-01T00:00:00Z"
    before: "2030-02-01T00:00:00Z"
    countries:
    - CH
    - LI
    headers:
    - name: X-Canary
      value: "yes"
    queryParams:
    - name: beta
      value: "1"
    - name: ref
    url: https://example.com/beta
  url: https://example.com/app
  variants:
  - url: https://example.com/app-b
    weight: 30
  - url: https://example.com/app-c
    weight: 20
  variantsEnd:
    at: "2030-02-28T23:00:00Z"
    url: https://example.com/app-b
`)
	expectServerAccepts(t, res.stdout)

	// Against the cluster: created, Ready, and the same spec again is unchanged.
	clusterArgs := append(append([]string{}, args[1:3]...), args[4:]...) // without --dry-run=client
	clusterArgs = append(clusterArgs, "-n", linked)
	runVerb(t, adminKube, "create", clusterArgs...).expect(t, ExitOK, wantURL(t, "https://example.com/app")+"\n", "shortlink.linkforge.io/app created")
	got := getLinkT(t, linked, "app")
	if len(got.Spec.Rules) != 4 || len(got.Spec.Variants) != 2 || got.Status.RuleCount != 4 || got.Status.VariantCount != 2 || !got.Spec.ForwardPath ||
		got.Spec.VariantsEnd == nil || len(got.Status.SplitBuckets) != 2 {
		t.Errorf("spec %+v, status %+v", got.Spec, got.Status)
	}
	runVerb(t, adminKube, "create", clusterArgs...).expect(t, ExitOK, "*", "shortlink.linkforge.io/app unchanged")
	runVerb(t, adminKube, "create", "app", "https://example.com/app", "-n", linked).
		expect(t, ExitNotReady, "", "already exists with another spec", `rules: [{"url":"https://apps.apple.com/app/id1"`, "(wanted <unset>)")
}

func TestCreateRefusesBadRulesAndVariants(t *testing.T) {
	for _, tc := range []struct {
		flags  []string
		code   int
		stderr string
	}{
		{[]string{"--rule", "device=ios"}, ExitUsage, `invalid --rule "device=ios" (rule 1): no url=: a rule needs its target`},
		{[]string{"--rule", "url=https://x.example/"}, ExitUsage, "--rule 1: a rule needs at least one condition"},
		{[]string{"--rule", "url=https://x.example/ os=ios"}, ExitUsage, `unknown key "os": use url, device, language, query, header, after, before or country`},
		{[]string{"--rule", "url=https://x.example/ device=watch"}, ExitUsage, `--rule 1: unknown device class "watch": use ios, android, desktop or bot`},
		{[]string{"--rule", "url=https://x.example/ header=X-A"}, ExitUsage, "header=X-A: write header=NAME=VALUE"},
		{[]string{"--rule", "url=https://x.example/ after=tomorrow"}, ExitUsage, "after=tomorrow: use an RFC 3339 time"},
		{[]string{"--rule", "url=https://x.example/ language"}, ExitUsage, `"language" is not KEY=VALUE`},
		{[]string{"--rule", ""}, ExitUsage, `invalid --rule "" (rule 1): empty`},
		{[]string{"--rule", "url=ftp://x.example/ device=ios"}, ExitNotReady, `invalid URL "ftp://x.example/" in --rule 1: scheme`},
		{[]string{"--variant", "url=https://b.example/ weight=0"}, ExitUsage, "weight=0: use a percentage from 1 to 100"},
		{[]string{"--variant", "url=https://b.example/"}, ExitUsage, "a variant needs url= and weight="},
		{[]string{"--variant", "url=https://b.example/ weight=60", "--variant", "url=https://c.example/ weight=50"}, ExitUsage, "the weights of --variant add up to 110"},
		{[]string{"--variant", "url=https://b.example/ weight=10", "--variant", "url=not-a-url weight=10"}, ExitNotReady, `invalid URL "not-a-url" in --variant 2`},
		{[]string{"--expired-url", "https://exa mple.com/"}, ExitNotReady, `invalid URL "https://exa mple.com/" in --expired-url`},
		{[]string{"--variant", "url=https://b.example/ weight=10", "--variants-end", "at=2030-01-01T00:00:00Z url=https://c.example/"}, ExitUsage,
			`--variants-end "https://c.example/" is neither spec.url nor the url of one of --variant`},
		{[]string{"--variants-end", "at=2030-01-01T00:00:00Z url=https://example.com/app"}, ExitUsage, "--variants-end ends the split of --variant: set variants"},
		{[]string{"--variant", "url=https://b.example/ weight=10", "--variants-end", "at=soon url=https://b.example/"}, ExitUsage, "at=soon: use an RFC 3339 time"},
		{[]string{"--variant", "url=https://b.example/ weight=10", "--variants-end", "url=https://b.example/"}, ExitUsage, "the end of the split needs at= and url="},
	} {
		args := append([]string{"app", "https://example.com/app", "--dry-run=client"}, tc.flags...)
		runVerb(t, "", "create", args...).expect(t, tc.code, "", tc.stderr)
	}
}
