package hostpolicy

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// failureCounter is a testing.TB that counts failures instead of failing,
// to run the policy checks against a policy with a rule taken out.
type failureCounter struct {
	testing.TB
	failures int
}

func (c *failureCounter) Helper()               {}
func (c *failureCounter) Errorf(string, ...any) { c.failures++ }
func (c *failureCounter) Fatalf(string, ...any) { c.failures++ }
func (c *failureCounter) Error(...any)          { c.failures++ }
func (c *failureCounter) Fatal(...any)          { c.failures++ }
func (c *failureCounter) Fail()                 { c.failures++ }
func (c *failureCounter) FailNow()              { c.failures++ }
func (c *failureCounter) Failed() bool          { return c.failures > 0 }

// ruleRemovals are the policies' rules, each as the text that states it and
// what is left once it is taken out.
var ruleRemovals = []struct {
	file, rule, text, without string
}{
	{"allowed_hosts_policy.yaml", "the validation", `- expression: '!variables.annotated || size(variables.refused) == 0'`, `- expression: 'true'`},
	{"allowed_hosts_policy.yaml", "a namespace without the annotation allows everything, others only their list", `'!variables.annotated || size(variables.refused) == 0'`, `'size(variables.refused) == 0'`},
	{"allowed_hosts_policy.yaml", "hosts compare without case", `).lowerAscii().find('^.*[^.]'))`, `).find('^.*[^.]'))`},
	{"allowed_hosts_policy.yaml", "a trailing dot is not part of a host", `).lowerAscii().find('^.*[^.]'))`, `).lowerAscii())`},
	{"allowed_hosts_policy.yaml", "the port is not part of a host", `a.substring(0, a.lastIndexOf(':'))`, `a`},
	{"allowed_hosts_policy.yaml", "a wildcard allows the hosts below its domain", `(p.startsWith('*.') && h.endsWith(p.substring(1)))`, `false`},
	{"allowed_hosts_policy.yaml", "a wildcard does not allow its apex", `h.endsWith(p.substring(1))`, `h.endsWith(p.substring(2))`},
	{"allowed_hosts_policy.yaml", "entries are lower-cased", `map(e, e.lowerAscii().find('^.*[^.]'))`, `map(e, e.find('^.*[^.]'))`},
	{"allowed_hosts_policy.yaml", "rules' targets are judged", `(has(object.spec.rules) ? object.spec.rules.map(r, r.url) : []) +`, `[] +`},
	{"allowed_hosts_policy.yaml", "variants' targets are judged", `(has(object.spec.variants) ? object.spec.variants.map(v, v.url) : []) +`, `[] +`},
	{"allowed_hosts_policy.yaml", "spec.expiredURL is judged", `(has(object.spec.expiredURL) ? [object.spec.expiredURL] : [])`, `[]`},
	{"denied_hosts_policy.yaml", "the validation", `- expression: size(variables.deniedHosts) == 0`, `- expression: 'true'`},
	{"denied_hosts_policy.yaml", "hosts compare without case", `).lowerAscii().find('^.*[^.]'))`, `).find('^.*[^.]'))`},
	{"denied_hosts_policy.yaml", "the port is not part of a host", `a.substring(0, a.lastIndexOf(':'))`, `a`},
	{"denied_hosts_policy.yaml", "a wildcard denies the hosts below its domain", `(p.startsWith('*.') && h.endsWith(p.substring(1)))`, `false`},
	{"denied_hosts_policy.yaml", "rules' targets are judged", `(has(object.spec.rules) ? object.spec.rules.map(r, r.url) : []) +`, `[] +`},
	{"denied_hosts_policy.yaml", "variants' targets are judged", `(has(object.spec.variants) ? object.spec.variants.map(v, v.url) : []) +`, `[] +`},
	{"denied_hosts_policy.yaml", "spec.expiredURL is judged", `(has(object.spec.expiredURL) ? [object.spec.expiredURL] : [])`, `[]`},
	{"allowed_hosts_annotation_policy.yaml", "the validation", `- expression: size(variables.invalid) == 0`, `- expression: 'true'`},
}

// TestPolicyChecksCatchRemovedRules takes each rule out of a policy in turn
// and runs the checks of TestAllowedHostsPolicyMatchesJudge,
// TestDeniedHostsPolicyMatchesJudge and TestAnnotationPolicyMatchesParse
// against it: each must fail, or those tests could not.
func TestPolicyChecksCatchRemovedRules(t *testing.T) {
	for _, m := range ruleRemovals {
		t.Run(fmt.Sprintf("%s: %s", strings.TrimSuffix(m.file, ".yaml"), m.rule), func(t *testing.T) {
			b, err := os.ReadFile(filepath.Join(policyDir, m.file))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(string(b), m.text) {
				t.Fatalf("%s no longer states the rule as %q: update ruleRemovals", m.file, m.text)
			}
			mutant := compilePolicy(t, m.file, []byte(strings.Replace(string(b), m.text, m.without, 1)))
			c := &failureCounter{TB: t}
			for _, urls := range targetSets(8) {
				switch m.file {
				case "allowed_hosts_policy.yaml":
					for _, a := range allowCorpus {
						checkAllowList(c, mutant, urls, a)
					}
				case "denied_hosts_policy.yaml":
					for _, d := range denyCorpus {
						checkDenyList(c, mutant, urls, d)
					}
				}
			}
			if m.file == "allowed_hosts_annotation_policy.yaml" {
				for _, a := range allowCorpus {
					if a != nil {
						checkAnnotation(c, mutant, *a)
					}
				}
			}
			if c.failures == 0 {
				t.Errorf("with %q taken out (%q instead of %q), the checks still pass", m.rule, m.without, m.text)
			}
		})
	}
}
