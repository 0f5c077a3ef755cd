package main

import (
	"bytes"
	"strings"
	"testing"
)

func TestRun(t *testing.T) {
	// Expected codes come from internal/shortcode/testdata/vectors.json.
	tests := []struct {
		name       string
		args       []string
		wantCode   int
		wantStdout string
		wantStderr []string // substrings
	}{
		{
			name:       "valid",
			args:       []string{"code", "HTTP://Example.COM/path"},
			wantStdout: "3rcB24QH1U\thttp://example.com/path\n",
		},
		{
			name:       "several URLs",
			args:       []string{"code", "http://example.com/path/", "http://example.com/path?z=1&a=2"},
			wantStdout: "3rcB24QH1U\thttp://example.com/path\nGa3DCe6yUD\thttp://example.com/path?a=2&z=1\n",
		},
		{
			name:       "invalid mixed with valid",
			args:       []string{"code", "ftp://example.com", "http://example.com/path", "https://user:pw@example.com/"},
			wantCode:   1,
			wantStdout: "3rcB24QH1U\thttp://example.com/path\n",
			wantStderr: []string{
				`invalid URL "ftp://example.com": scheme: scheme "ftp" is not allowed; use http or https` + "\n",
				`invalid URL "https://user:pw@example.com/": userinfo: `,
			},
		},
		{
			name:       "control characters are quoted",
			args:       []string{"code", "http://example.com/\r\nSet-Cookie: x=1"},
			wantCode:   1,
			wantStderr: []string{`invalid URL "http://example.com/\r\nSet-Cookie: x=1": control character: `},
		},
		{
			name:       "namespace flag",
			args:       []string{"code", "-n", "team-a", "http://example.com/path"},
			wantStdout: "7dL2RYGQFt\thttp://example.com/path\n",
		},
		{
			name:       "long namespace flag",
			args:       []string{"code", "--namespace=ws_abc123", "http://example.com/path"},
			wantStdout: "WhpJT5u5Ka\thttp://example.com/path\n",
		},
		{
			name:       "salt flag",
			args:       []string{"code", "--salt", "1", "http://example.com/path"},
			wantStdout: "ExocFZWtTM\thttp://example.com/path\n",
		},
		{
			name:       "salt and namespace",
			args:       []string{"code", "-n", "team-a", "-salt=9", "http://example.com/path"},
			wantStdout: "J6ewDM5CHz\thttp://example.com/path\n",
		},
		{
			name:       "bad salt",
			args:       []string{"code", "--salt", "10", "http://example.com/path"},
			wantCode:   2,
			wantStderr: []string{"invalid --salt 10: must be 0-9", "usage: linkforge code"},
		},
		{
			name:       "negative salt",
			args:       []string{"code", "--salt=-1", "http://example.com/path"},
			wantCode:   2,
			wantStderr: []string{"invalid --salt -1"},
		},
		{
			name:       "non-numeric salt",
			args:       []string{"code", "--salt", "x", "http://example.com/path"},
			wantCode:   2,
			wantStderr: []string{`invalid value "x" for flag -salt`},
		},
		{
			name:       "empty namespace",
			args:       []string{"code", "-n", "", "http://example.com/path"},
			wantCode:   2,
			wantStderr: []string{"namespace must not be empty"},
		},
		{
			name:       "unknown flag",
			args:       []string{"code", "-x", "http://example.com/path"},
			wantCode:   2,
			wantStderr: []string{"flag provided but not defined: -x"},
		},
		{
			name:       "no URLs",
			args:       []string{"code"},
			wantCode:   2,
			wantStderr: []string{"no URL given", "usage: linkforge code"},
		},
		{
			name:       "no args",
			args:       nil,
			wantCode:   2,
			wantStderr: []string{"usage:"},
		},
		{
			name:       "unknown subcommand",
			args:       []string{"shorten", "http://example.com/"},
			wantCode:   2,
			wantStderr: []string{`unknown command "shorten"`, "usage:"},
		},
		{
			name:       "help",
			args:       []string{"-h"},
			wantStderr: []string{"usage:"},
		},
		{
			name:       "code help",
			args:       []string{"code", "-h"},
			wantStderr: []string{"usage: linkforge code", "-salt"},
		},
		{
			name:       "version",
			args:       []string{"version"},
			wantStdout: "dev\n",
		},
		{
			name:       "version with arguments",
			args:       []string{"version", "x"},
			wantCode:   2,
			wantStderr: []string{"takes no arguments"},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var stdout, stderr bytes.Buffer
			code := run(tc.args, &stdout, &stderr)
			if code != tc.wantCode {
				t.Errorf("exit status %d, want %d (stderr: %q)", code, tc.wantCode, stderr.String())
			}
			if stdout.String() != tc.wantStdout {
				t.Errorf("stdout = %q, want %q", stdout.String(), tc.wantStdout)
			}
			for _, want := range tc.wantStderr {
				if !strings.Contains(stderr.String(), want) {
					t.Errorf("stderr = %q, want it to contain %q", stderr.String(), want)
				}
			}
			if len(tc.wantStderr) == 0 && stderr.Len() != 0 {
				t.Errorf("unexpected stderr %q", stderr.String())
			}
		})
	}
}

// The cluster verbs are package plugin's; run hands them their arguments.
func TestRunHandsClusterVerbsToThePlugin(t *testing.T) {
	var stdout, stderr bytes.Buffer
	code := run([]string{"create", "docs", "https://example.com/docs", "--dry-run=client", "-n", "team-a"}, &stdout, &stderr)
	if code != 0 || !strings.Contains(stdout.String(), "kind: ShortLink\nmetadata:\n  name: docs\n  namespace: team-a\n") {
		t.Errorf("create --dry-run=client: exit %d, stdout %q, stderr %q", code, stdout.String(), stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"get", "a", "b"}, &stdout, &stderr); code != 2 || !strings.Contains(stderr.String(), "get takes at most one NAME") {
		t.Errorf("get a b: exit %d, stderr %q", code, stderr.String())
	}
	stdout.Reset()
	stderr.Reset()
	if code := run([]string{"open"}, &stdout, &stderr); code != 2 {
		t.Errorf("open: exit %d, stderr %q", code, stderr.String())
	}
}
