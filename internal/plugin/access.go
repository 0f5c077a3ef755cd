package plugin

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"

	"github.com/spf13/pflag"
	"golang.org/x/term"

	linkv1 "github.com/linkforge/linkforge/api/v1alpha1"
	"github.com/linkforge/linkforge/internal/gate"
)

// accessOptions are create's flags of spec.access: a gated link.
type accessOptions struct {
	prompt bool
	hash   string
	users  []string
	groups []string
}

func (a *accessOptions) flags(f *pflag.FlagSet) {
	f.BoolVar(&a.prompt, "password-prompt", false, "gate the link with a password, asked on the terminal (twice) or read as one line of stdin, and hashed here with bcrypt: only its hash is written (spec.access.passwordHash)")
	f.StringVar(&a.hash, "password-hash", "", "gate the link with the password of this bcrypt hash ($2b$10$...), made elsewhere")
	f.StringArrayVar(&a.users, "allow-user", nil, "open the link for this user signed in through the redirector's trusted auth proxy (repeat for more; spec.access.users)")
	f.StringArrayVar(&a.groups, "allow-group", nil, "open the link for the members of this group signed in through the redirector's trusted auth proxy (repeat for more; spec.access.groups)")
}

// passwordInput is where --password-prompt reads: the terminal, else a
// line of it (tests replace it).
var passwordInput = func() (io.Reader, int, bool) {
	fd := int(os.Stdin.Fd())
	return os.Stdin, fd, term.IsTerminal(fd)
}

// passwordPrompts is where the prompts go (the terminal's stderr).
var passwordPrompts io.Writer = os.Stderr

// set sets spec.access from the flags, the password hashed here: it never
// leaves this process.
func (a *accessOptions) set(spec *linkv1.ShortLinkSpec) error {
	if !a.prompt && a.hash == "" && len(a.users) == 0 && len(a.groups) == 0 {
		return nil
	}
	acc := &linkv1.LinkAccess{Users: a.users, Groups: a.groups}
	switch {
	case a.prompt && a.hash != "":
		return usageErrorf("create", "--password-prompt and --password-hash both set the password: use one")
	case a.hash != "":
		if err := gate.CheckHash(a.hash); err != nil {
			return usageErrorf("create", "invalid --password-hash: %v", err)
		}
		acc.PasswordHash = a.hash
	case a.prompt:
		password, err := readPassword()
		if err != nil {
			return usageErrorf("create", "--password-prompt: %v", err)
		}
		if acc.PasswordHash, err = gate.Hash(password, gate.DefaultCost); err != nil {
			return usageErrorf("create", "--password-prompt: %v", err)
		}
	}
	for _, list := range [][]string{a.users, a.groups} {
		for _, name := range list {
			if name == "" || len(name) > gate.MaxNameBytes {
				return usageErrorf("create", "invalid --allow-user or --allow-group %q: 1 to %d bytes", name, gate.MaxNameBytes)
			}
		}
	}
	spec.Access = acc
	return nil
}

// readPassword asks for the password twice on a terminal, or reads one
// line of a pipe.
func readPassword() ([]byte, error) {
	in, fd, tty := passwordInput()
	if !tty {
		line, err := bufio.NewReader(io.LimitReader(in, gate.MaxPasswordBytes+2)).ReadBytes('\n')
		if err != nil && err != io.EOF {
			return nil, err
		}
		line = bytes.TrimRight(line, "\r\n")
		if len(line) > gate.MaxPasswordBytes {
			return nil, fmt.Errorf("a password longer than %d bytes: bcrypt reads at most %d", gate.MaxPasswordBytes, gate.MaxPasswordBytes)
		}
		return line, nil
	}
	_, _ = fmt.Fprint(passwordPrompts, "Password: ")
	first, err := term.ReadPassword(fd)
	_, _ = fmt.Fprintln(passwordPrompts)
	if err != nil {
		return nil, err
	}
	_, _ = fmt.Fprint(passwordPrompts, "Again: ")
	again, err := term.ReadPassword(fd)
	_, _ = fmt.Fprintln(passwordPrompts)
	if err != nil {
		return nil, err
	}
	if !bytes.Equal(first, again) {
		return nil, fmt.Errorf("the two passwords differ")
	}
	return first, nil
}
