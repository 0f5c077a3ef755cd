package repocheck

import (
	"bytes"
	"fmt"
	"os/exec"
	"sort"
	"strings"
)

// Skew is a module that linkforge and its tools module (hack/tools) both
// compile, at two versions: the build cache then compiles its packages, and
// every package above them, twice.
type Skew struct {
	Module, Project, Tools string
}

func (s Skew) String() string {
	return fmt.Sprintf("%s: %s in go.mod, %s in hack/tools/go.mod", s.Module, s.Project, s.Tools)
}

// ToolsSkew compares the modules whose packages linkforge compiles (its
// packages and their tests, in root) with those the tools module compiles
// (its tools and ./otelcol, in root/hack/tools) and returns the modules
// compiled at two versions, sorted by path.
func ToolsSkew(root string) ([]Skew, error) {
	project, err := compiledModules(root, "-test", "./...")
	if err != nil {
		return nil, err
	}
	tools, err := compiledModules(root+"/hack/tools", "tool", "./otelcol")
	if err != nil {
		return nil, err
	}
	var skews []Skew
	for module, pv := range project {
		if tv, ok := tools[module]; ok && tv != pv {
			skews = append(skews, Skew{Module: module, Project: pv, Tools: tv})
		}
	}
	sort.Slice(skews, func(i, j int) bool { return skews[i].Module < skews[j].Module })
	return skews, nil
}

// compiledModules maps each module that provides a package of the build of
// args in dir (go list -deps) to its version; the main module has none.
func compiledModules(dir string, args ...string) (map[string]string, error) {
	cmd := exec.Command("go", append([]string{"list", "-deps", "-f", "{{with .Module}}{{.Path}} {{.Version}}{{end}}"}, args...)...)
	cmd.Dir = dir
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("go list -deps %s in %s: %v: %s", strings.Join(args, " "), dir, err, strings.TrimSpace(stderr.String()))
	}
	modules := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if path, version, ok := strings.Cut(line, " "); ok && version != "" {
			modules[path] = version
		}
	}
	return modules, nil
}
