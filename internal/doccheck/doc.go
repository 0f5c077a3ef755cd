// Package doccheck holds the tests of the project's documentation: every
// relative link in README.md and docs/ points at a file that exists, and
// at a heading of it where it names one.
package doccheck
