package images

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParsePlatforms(t *testing.T) {
	for _, tc := range []struct {
		list, want, err string
	}{
		{list: "", want: "linux/amd64,linux/arm64"},
		{list: "  ", want: "linux/amd64,linux/arm64"},
		{list: "linux/amd64", want: "linux/amd64"},
		{list: "linux/arm64", want: "linux/arm64"},
		{list: "linux/arm64, linux/amd64", want: "linux/amd64,linux/arm64"}, // Platforms' order
		{list: "linux/s390x", err: `platform "linux/s390x" is not one the images are built for (linux/amd64, linux/arm64)`},
		{list: "linux/amd64,", err: `platform "" is not one`},
		{list: "amd64", err: `platform "amd64" is not one`},
		{list: "linux/amd64,linux/amd64", err: `platform "linux/amd64" is listed twice`},
	} {
		got, err := ParsePlatforms(tc.list)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("ParsePlatforms(%q): error %v, want one with %q", tc.list, err, tc.err)
			}
			continue
		}
		if err != nil {
			t.Errorf("ParsePlatforms(%q): %v", tc.list, err)
			continue
		}
		if diff := cmp.Diff(tc.want, strings.Join(PlatformStringsOf(got), ",")); diff != "" {
			t.Errorf("ParsePlatforms(%q) (-want +got):\n%s", tc.list, diff)
		}
	}
}

func TestWriteReadPlatforms(t *testing.T) {
	dir := t.TempDir()
	if got, err := ReadPlatforms(dir); err != nil || strings.Join(PlatformStringsOf(got), ",") != "linux/amd64,linux/arm64" {
		t.Errorf("no record: %v %v, want every platform", got, err)
	}
	amd64, _ := ParsePlatforms("linux/amd64")
	if err := WritePlatforms(dir, amd64); err != nil {
		t.Fatal(err)
	}
	if got, err := ReadPlatforms(dir); err != nil || strings.Join(PlatformStringsOf(got), ",") != "linux/amd64" {
		t.Errorf("after recording linux/amd64: %v %v", got, err)
	}
	if err := os.WriteFile(filepath.Join(dir, PlatformsFile), []byte("linux/s390x\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ReadPlatforms(dir); err == nil || !strings.Contains(err.Error(), PlatformsFile) {
		t.Errorf("a bad record: %v, want an error naming the file", err)
	}
}
