package images

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/linkforge/linkforge/internal/testenv"
)

func moduleRoot(t *testing.T) string {
	t.Helper()
	root, err := testenv.ModuleRoot()
	if err != nil {
		t.Fatal(err)
	}
	return root
}

// TestGeneratedFilesUpToDate checks the committed Dockerfile and .ko.yaml are
// what internal/images renders: `make generate` writes them.
func TestGeneratedFilesUpToDate(t *testing.T) {
	root := moduleRoot(t)
	for file, want := range map[string]string{"Dockerfile": Dockerfile(), ".ko.yaml": KoConfig()} {
		got, err := os.ReadFile(filepath.Join(root, file))
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != want {
			t.Errorf("%s is not what internal/images renders: run `make generate`", file)
		}
	}
}

// TestMakeBuildsLikeTheImages checks the Makefile's build configuration is
// the images' (its tags are BuildTags, cgo off, trimmed), so the build cache
// holds one compiled copy of every package for vet, the tests and ko.
func TestMakeBuildsLikeTheImages(t *testing.T) {
	mk, err := os.ReadFile(filepath.Join(moduleRoot(t), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"\nexport BUILD_TAGS = " + BuildTags + "\n",
		"\nexport CGO_ENABLED ?= 0\n",
		"\nexport GOFLAGS ?= -trimpath -tags=$(BUILD_TAGS)\n",
	} {
		if !strings.Contains(string(mk), want) {
			t.Errorf("the Makefile has no line %q: it must build as ko builds the images", strings.TrimSpace(want))
		}
	}
}

// TestGoImageMatchesGoMod checks the Dockerfile builds with go.mod's Go.
func TestGoImageMatchesGoMod(t *testing.T) {
	mod, err := os.ReadFile(filepath.Join(moduleRoot(t), "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindSubmatch(mod)
	if m == nil {
		t.Fatal("no go directive in go.mod")
	}
	if want := "golang:" + string(m[1]); GoImage != want {
		t.Errorf("GoImage %s, go.mod says %s", GoImage, want)
	}
}

// stage is what a Dockerfile stage sets, inherited by stages built FROM it.
type stage struct {
	user, workdir string
	env           []string
	entrypoint    []string
	// copies maps a COPY's destination to its --chown ("" when none).
	copies map[string]string
}

// parseDockerfile reads the instructions the rendered Dockerfile uses into
// its stages by name. It is deliberately small: it knows FROM, COPY, ENV,
// USER, WORKDIR and ENTRYPOINT in their one-line forms.
func parseDockerfile(t *testing.T, text string) map[string]*stage {
	t.Helper()
	stages := map[string]*stage{}
	var cur *stage
	for _, line := range strings.Split(strings.ReplaceAll(text, "\\\n", " "), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		instr, rest, _ := strings.Cut(line, " ")
		fields := strings.Fields(rest)
		switch strings.ToUpper(instr) {
		case "FROM":
			args := slices.DeleteFunc(fields, func(f string) bool { return strings.HasPrefix(f, "--") })
			cur = &stage{copies: map[string]string{}}
			if parent, ok := stages[args[0]]; ok {
				*cur = *parent
				cur.env = slices.Clone(parent.env)
				cur.copies = map[string]string{}
				for k, v := range parent.copies {
					cur.copies[k] = v
				}
			}
			if len(args) == 3 && strings.EqualFold(args[1], "AS") {
				stages[args[2]] = cur
			}
		case "COPY":
			chown := ""
			var paths []string
			for _, f := range fields {
				if v, ok := strings.CutPrefix(f, "--chown="); ok {
					chown = v
				} else if !strings.HasPrefix(f, "--") {
					paths = append(paths, f)
				}
			}
			cur.copies[paths[len(paths)-1]] = chown
		case "ENV":
			cur.env = append(cur.env, rest)
		case "USER":
			cur.user = rest
		case "WORKDIR":
			cur.workdir = rest
		case "ENTRYPOINT":
			if err := json.Unmarshal([]byte(rest), &cur.entrypoint); err != nil {
				t.Fatalf("ENTRYPOINT %s: want the exec (JSON) form: %v", rest, err)
			}
		}
	}
	return stages
}

// TestDockerfileMatchesBuiltImages holds the committed Dockerfile to the
// images ko built: for every image a target of its name with the binary
// copied to the image's entrypoint, the same user, working directory and
// environment, and the base's files copied with their owners.
func TestDockerfileMatchesBuiltImages(t *testing.T) {
	root, dir := builtDir(t)
	text, err := os.ReadFile(filepath.Join(root, "Dockerfile"))
	if err != nil {
		t.Fatal(err)
	}
	stages := parseDockerfile(t, string(text))
	for _, b := range readBuilt(t, dir) {
		if b.platform.Architecture != "amd64" {
			continue // the Dockerfile's config does not depend on the platform
		}
		s, ok := stages[b.spec.Name]
		if !ok {
			t.Errorf("the Dockerfile has no target %s", b.spec.Name)
			continue
		}
		c := b.config.Config
		if !slices.Equal(s.entrypoint, c.Entrypoint) {
			t.Errorf("%s: Dockerfile ENTRYPOINT %q, image %q", b.spec.Name, s.entrypoint, c.Entrypoint)
		}
		if _, ok := s.copies[c.Entrypoint[0]]; !ok {
			t.Errorf("%s: the Dockerfile copies no binary to %s (copies %v)", b.spec.Name, c.Entrypoint[0], s.copies)
		}
		if s.user != c.User || s.workdir != c.WorkingDir {
			t.Errorf("%s: Dockerfile USER %q WORKDIR %q, image %q %q", b.spec.Name, s.user, s.workdir, c.User, c.WorkingDir)
		}
		if !slices.Equal(s.env, c.Env) {
			t.Errorf("%s: Dockerfile ENV %q, image %q", b.spec.Name, s.env, c.Env)
		}
		if _, ok := s.copies["/"]; !ok {
			t.Errorf("%s: the Dockerfile does not copy the base's files to /", b.spec.Name)
		}
		// What the image owns other than root, the Dockerfile must chown.
		for p, f := range b.files {
			if f.Header.Uid == 0 && f.Header.Gid == 0 {
				continue
			}
			if got := s.copies[p+"/"] + s.copies[p]; got != strconv.Itoa(f.Header.Uid)+":"+strconv.Itoa(f.Header.Gid) {
				t.Errorf("%s: %s is owned by %d:%d in the image; the Dockerfile copies it with --chown=%q", b.spec.Name, p, f.Header.Uid, f.Header.Gid, got)
			}
		}
	}
}
