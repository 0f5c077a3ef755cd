package repocheck

import (
	"encoding/json"
	"fmt"
	"os"
	"sort"
	"strings"

	"golang.org/x/mod/semver"
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
	out, err := output(dir, "go", append([]string{"list", "-deps", "-f", "{{with .Module}}{{.Path}} {{.Version}}{{end}}"}, args...)...)
	if err != nil {
		return nil, err
	}
	modules := map[string]string{}
	for _, line := range strings.Split(string(out), "\n") {
		if path, version, ok := strings.Cut(line, " "); ok && version != "" {
			modules[path] = version
		}
	}
	return modules, nil
}

// GatewayLag is a module hack/gateway requires at an older version than
// linkforge (or hack/tools) compiles: its packages, and every package above
// them, compile twice in a cold make test.
type GatewayLag struct {
	Module, Gateway, Newest, Where string
}

func (l GatewayLag) String() string {
	return fmt.Sprintf("%s: %s in hack/gateway/go.mod, %s in %s", l.Module, l.Gateway, l.Newest, l.Where)
}

// GatewaySkew compares what hack/gateway (Traefik and cert-manager, for the
// tests through a real Gateway) requires with what linkforge and its tools
// module compile, and returns the modules it requires at an older version
// than either compiles, sorted by path, leaving out those under a prefix of
// hack/gateway/held-back.txt; stale lists the prefixes of that file that no
// longer hold a module back. The gateway's module may need a newer version
// than linkforge's (Traefik's or cert-manager's own requirements); an older
// one only ever costs a second compile. It reads the gateway's go.mod as
// written (go mod edit -json): its patched copies need not exist.
func GatewaySkew(root string) (lags []GatewayLag, stale []string, err error) {
	project, err := compiledModules(root, "-test", "./...")
	if err != nil {
		return nil, nil, err
	}
	tools, err := compiledModules(root+"/hack/tools", "tool", "./otelcol")
	if err != nil {
		return nil, nil, err
	}
	gateway, err := requiredModules(root + "/hack/gateway")
	if err != nil {
		return nil, nil, err
	}
	held, err := heldBack(root + "/hack/gateway/held-back.txt")
	if err != nil {
		return nil, nil, err
	}
	holding := map[string]bool{}
	for module, gv := range gateway {
		newest, by := "", ""
		if v, ok := project[module]; ok {
			newest, by = v, "go.mod"
		}
		if v, ok := tools[module]; ok && semver.Compare(v, newest) > 0 {
			newest, by = v, "hack/tools/go.mod"
		}
		if newest == "" || semver.Compare(gv, newest) >= 0 {
			continue
		}
		if prefix := heldBy(held, module); prefix != "" {
			holding[prefix] = true
			continue
		}
		lags = append(lags, GatewayLag{Module: module, Gateway: gv, Newest: newest, Where: by})
	}
	for _, prefix := range held {
		if !holding[prefix] {
			stale = append(stale, prefix)
		}
	}
	sort.Slice(lags, func(i, j int) bool { return lags[i].Module < lags[j].Module })
	return lags, stale, nil
}

// requiredModules maps each module dir's go.mod requires to its version.
func requiredModules(dir string) (map[string]string, error) {
	out, err := output(dir, "go", "mod", "edit", "-json")
	if err != nil {
		return nil, err
	}
	var mod struct {
		Require []struct{ Path, Version string }
	}
	if err := json.Unmarshal(out, &mod); err != nil {
		return nil, fmt.Errorf("go mod edit -json in %s: %v", dir, err)
	}
	modules := map[string]string{}
	for _, r := range mod.Require {
		modules[r.Path] = r.Version
	}
	return modules, nil
}

// heldBack reads the module prefixes of a held-back file: the first field
// of each line that is not blank or a comment.
func heldBack(path string) ([]string, error) {
	text, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var prefixes []string
	for _, line := range strings.Split(string(text), "\n") {
		if fields := strings.Fields(line); len(fields) > 0 && !strings.HasPrefix(fields[0], "#") {
			prefixes = append(prefixes, fields[0])
		}
	}
	return prefixes, nil
}

// heldBy returns the prefix of held that module is, or is under ("" if none).
func heldBy(held []string, module string) string {
	for _, prefix := range held {
		if module == prefix || strings.HasPrefix(module, prefix+"/") {
			return prefix
		}
	}
	return ""
}
