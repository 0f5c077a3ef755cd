package plugin

import (
	"io"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/gate"
)

// pipePassword makes --password-prompt read in from a pipe (not a
// terminal) for the test.
func pipePassword(t *testing.T, in string) {
	t.Helper()
	old := passwordInput
	passwordInput = func() (io.Reader, int, bool) { return strings.NewReader(in), -1, false }
	t.Cleanup(func() { passwordInput = old })
}

// A gated link from create's flags: --password-prompt hashes a piped
// password here (only the hash is written, and it verifies the password),
// --password-hash takes a hash as given, --allow-user and --allow-group
// fill spec.access; the API server accepts each manifest.
func TestCreateGatesLinks(t *testing.T) {
	freshNamespaces(t)
	pipePassword(t, "correct horse battery staple\n")
	res := runVerb(t, "", "create", "team", "https://example.com/team", "--dry-run=client", "--password-prompt", "--allow-group", "sre")
	if res.code != ExitOK {
		t.Fatalf("create --password-prompt: %d\n%s", res.code, res.stderr)
	}
	if strings.Contains(res.stdout, "correct horse") {
		t.Fatalf("the manifest holds the password:\n%s", res.stdout)
	}
	var sl linkv1.ShortLink
	if err := yaml.Unmarshal([]byte(res.stdout), &sl); err != nil || sl.Spec.Access == nil {
		t.Fatalf("no spec.access in (%v):\n%s", err, res.stdout)
	}
	if err := gate.CheckHash(sl.Spec.Access.PasswordHash); err != nil {
		t.Errorf("the hash written: %v", err)
	}
	if !gate.Verify(sl.Spec.Access.PasswordHash, []byte("correct horse battery staple")) {
		t.Errorf("the hash written does not verify the password piped in (the line's newline hashed too?)")
	}
	if len(sl.Spec.Access.Groups) != 1 || sl.Spec.Access.Groups[0] != "sre" || len(sl.Spec.Access.Users) != 0 {
		t.Errorf("users %v, groups %v", sl.Spec.Access.Users, sl.Spec.Access.Groups)
	}
	expectServerAccepts(t, res.stdout)

	hash, err := gate.Hash([]byte("s3cret words"), gate.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	res = runVerb(t, "", "create", "hashed", "https://example.com/h", "--dry-run=client", "--password-hash", hash, "--allow-user", "ada@example.com", "--allow-user", "bob")
	res.expect(t, ExitOK, `apiVersion: linkforge.io/v1alpha1
kind: ShortLink
metadata:
  name: hashed
spec:
  access:
    passwordHash: `+hash+`
    users:
    - ada@example.com
    - bob
  url: https://example.com/h
`)
	expectServerAccepts(t, res.stdout)
}

func TestCreateRefusesBadGates(t *testing.T) {
	low, err := gate.Hash([]byte("x"), gate.MinCost)
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, stdin string
		flags       []string
		stderr      string
	}{
		{"the password itself as the hash", "", []string{"--password-hash", "hunter2"}, "invalid --password-hash: not a bcrypt hash ($2b$10$ and 53 characters): write the hash, never the password"},
		{"a cost too low", "", []string{"--password-hash", "$2b$04$" + low[7:]}, "invalid --password-hash: bcrypt cost 4: use 10 to 12"},
		{"a cost too high", "", []string{"--password-hash", "$2b$14$" + low[7:]}, "invalid --password-hash: bcrypt cost 14: use 10 to 12"},
		{"both password flags", "pw\n", []string{"--password-prompt", "--password-hash", low}, "--password-prompt and --password-hash both set the password: use one"},
		{"an empty password", "\n", []string{"--password-prompt"}, "--password-prompt: an empty password"},
		{"nothing piped", "", []string{"--password-prompt"}, "--password-prompt: an empty password"},
		{"a password past bcrypt's 72 bytes", strings.Repeat("p", 73) + "\n", []string{"--password-prompt"}, "--password-prompt: a password longer than 72 bytes: bcrypt reads at most 72"},
		{"a long line with no end", strings.Repeat("p", 10000), []string{"--password-prompt"}, "--password-prompt: a password longer than 72 bytes"},
		{"an empty user", "", []string{"--allow-user", ""}, `invalid --allow-user or --allow-group "": 1 to`},
		{"a group too long", "", []string{"--allow-group", strings.Repeat("g", gate.MaxNameBytes+1)}, "invalid --allow-user or --allow-group"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pipePassword(t, tc.stdin)
			args := append([]string{"app", "https://example.com/app", "--dry-run=client"}, tc.flags...)
			runVerb(t, "", "create", args...).expect(t, ExitUsage, "", tc.stderr)
		})
	}
}
