// Package hostpolicy decides whether a ShortLink may redirect to the host of
// its URL: the destination policy. This comment is normative; the controller
// applies it to every link, and the ValidatingAdmissionPolicies of
// config/destination-policy mirror it in CEL at admission (cel_test.go runs
// those expressions against this package). The package is pure (no I/O, no
// Kubernetes imports).
//
// # Lists
//
// A list is a set of host patterns. There are two kinds:
//
//   - A namespace's allow-list: the annotation linkforge.io/allowed-hosts on
//     the Namespace ([AllowedHostsAnnotation]), set by whoever may edit
//     Namespaces (cluster administrators). A namespace without the annotation
//     allows every host; with it (even empty), only the hosts its patterns
//     match.
//   - Deny-lists: every DestinationDenyList object (cluster-scoped). A host
//     that any of them matches is denied in every namespace, whatever the
//     namespace's allow-list says.
//
// The annotation's value is split into entries at commas and ASCII white
// space (space, tab, CR, LF, form feed); empty entries are dropped. A
// DestinationDenyList lists one entry per item.
//
// # Patterns
//
// Each entry is lower-cased (ASCII letters only) and loses its trailing dots;
// the result is a pattern if it is one of:
//
//   - an IPv4 address in dotted decimal without leading zeros: 169.254.169.254;
//   - an IPv6 address in brackets: [fd00:ec2::254] (compared in its RFC 5952
//     form, so [FD00:0EC2:0::254] is the same pattern);
//   - a domain name, labels of a-z 0-9 - _ joined by dots, whose last label is
//     not a number (all digits, or 0x and hex digits: such a name is an IPv4
//     address to browsers); or "*." followed by such a name, a wildcard.
//
// Anything else (a scheme, a port, a path, non-ASCII: write a non-ASCII
// domain in its ASCII, punycode, form) is not a pattern: it matches nothing,
// and is reported as ignored. A DestinationDenyList refuses such entries when
// it is written (the CRD's rule), and so does the linkforge.io/allowed-hosts
// annotation with the policy installed.
//
// # Matching
//
// The host compared is the host of the link's canonical URL (package
// shortcode: lower case, IDNA to punycode, no port), turned into its key
// ([Key]): trailing dots removed; an IPv6 address in its RFC 5952 form, and
// an IPv4-mapped one ([::ffff:a.b.c.d]) as the IPv4 address it reaches; a name
// that ends in a number parsed as the WHATWG URL standard's IPv4 parser does,
// so 2852039166, 0xA9FEA9FE, 0251.0376.0251.0376 and 169.254.43518 are all
// 169.254.169.254, as they are to browsers.
//
// A key matches an exact pattern if it is equal to the pattern's key, and a
// wildcard "*.d" if it ends with ".d": *.example.com matches a.example.com
// and a.b.example.com, not example.com itself (list both to allow both; this
// is how Gateway API hostnames and most allow-lists read a wildcard) and not
// evilexample.com. The port is not compared: a pattern allows or denies every
// port of its host.
//
// # Decision
//
// A link's destination is allowed when no deny-list matches its key and,
// if its namespace has the annotation, the allow-list does. A link with
// several targets is allowed only when each of them is. [Policy.Judge]
// gives the decision and, when it refuses, a message naming the list and the
// entry that decided.
//
// # What admission can check
//
// CEL has no IDNA and no WHATWG IPv4 parser. The policy's expressions take the
// host of every target as written (spec.url, each rule's and variant's url,
// spec.expiredURL: a link is judged as a whole), lower-case its ASCII
// letters and remove its trailing dots. They compare it exactly, as above, when it is "plain": only
// a-z 0-9 . - _, and, if its last label is a number, a dotted-decimal IPv4
// address. Other hosts (non-ASCII, an IPv6 literal, 2852039166) are judged
// only by what is sound without IDNA: equal to a pattern as written, or ending
// with a wildcard's ".d" (IDNA keeps an ASCII tail of labels as it is). So
//
//   - in a namespace with an allow-list, admission refuses such a host unless
//     it matches that way; its message says to write the host in ASCII
//     (punycode) or as listed. bücher.example under *.example is admitted;
//     bücher.example under xn--bcher-kva.example is refused at admission and
//     https://xn--bcher-kva.example/ is the same link (same canonical URL,
//     same code);
//   - a deny-list refuses such a host at admission only if it matches that
//     way; the others are admitted and the controller, which computes the key,
//     refuses them (state Blocked, reason DestinationNotAllowed, a Warning
//     event): 2852039166 under a deny-list of 169.254.169.254 is admitted and
//     then Blocked, never served.
//
// Whatever admission admits that this package refuses, the controller blocks.
// What admission refuses is always refused by this package, or has a host
// the canonicalizer refuses.
package hostpolicy
