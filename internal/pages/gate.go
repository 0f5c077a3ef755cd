package pages

import (
	"bytes"
	"html/template"
)

// A password-gated link (spec.access.passwordHash) answers a person's GET
// with a form that posts the password back to the link's own path, and a
// wrong password (or one posted while the link takes no more guesses) with
// the same form and one message: the two are never told apart, in words,
// size or status. The page shows the link's card (its title and
// description), never its destination; no script, noindex, and a CSP that
// lets the form post only to its own origin.

// GatePageHeaders are the form's headers: PageHeaders, with the form
// allowed to post to this origin.
var GatePageHeaders = []Header{
	{"X-Robots-Tag", "noindex, nofollow"},
	{headerCSP, "default-src 'none'; style-src 'unsafe-inline'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"},
	{"Referrer-Policy", "no-referrer"},
	NoSniff,
}

// GateRefused is the one message of a password that did not open the link.
const GateRefused = "That did not open the link. Check the password and try again in a minute."

var gatePage = template.Must(template.New("gate").Parse(`<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="robots" content="noindex, nofollow">
<meta name="referrer" content="no-referrer">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{{.Card.Title}}</title>
<style>body{font-family:system-ui,sans-serif;max-width:28rem;margin:3rem auto;padding:0 1rem;line-height:1.5}input,button{font:inherit;padding:.4rem}p.refused{color:#a40000}</style>
</head>
<body>
<h1>{{.Card.Title}}</h1>
{{if .Card.Description}}<p>{{.Card.Description}}</p>
{{end}}<p>This link is protected by a password.</p>
{{if .Refused}}<p class="refused" role="alert">{{.Refused}}</p>
{{end}}<form method="post" autocomplete="off">
<label for="password">Password</label>
<input id="password" name="password" type="password" autocomplete="current-password" maxlength="72" required autofocus>
<button type="submit">Open</button>
</form>
</body>
</html>
`))

// Gate is what the form shows: the link's card, and GateRefused after a
// password that did not open it.
type Gate struct {
	Card    Card
	Refused string
}

// Render renders the form within b: a BusyError when b refuses it.
func (g *Gate) Render(b *Budget) ([]byte, error) {
	return b.render(func() ([]byte, error) {
		var buf bytes.Buffer
		if err := gatePage.Execute(&buf, g); err != nil { // not for these types
			return nil, err
		}
		return buf.Bytes(), nil
	})
}
