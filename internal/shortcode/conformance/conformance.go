// Package conformance loads the conformance vectors of the code algorithm
// (internal/shortcode/testdata/vectors.json, a copy of the project's shared
// vectors: the repository stands alone) for the tests of every package that
// computes codes.
package conformance

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"

	"github.com/linkforge/linkforge/internal/testenv"
)

// Vectors mirrors vectors.json.
type Vectors struct {
	Valid   []Valid   `json:"valid"`
	Invalid []Invalid `json:"invalid"`
}

// Valid is a URL, its canonical form and its codes in some namespaces and salts.
type Valid struct {
	URL       string `json:"url"`
	Canonical string `json:"canonical"`
	Codes     []Code `json:"codes"`
}

// Code is the code of a canonical URL in a namespace at a salt.
type Code struct {
	// Namespace is the namespace name in the hash input. The JSON key is
	// the one of the shared vectors file, which is copied verbatim.
	Namespace string `json:"workspace"`
	Salt      int    `json:"salt"`
	Code      string `json:"code"`
}

// Invalid is a URL and the reason it is refused.
type Invalid struct {
	URL    string `json:"url"`
	Reason string `json:"reason"`
}

// Load reads the vectors from the source tree. Tests run in it, so the
// module root is found from the working directory (not from this file's
// compiled path, which -trimpath makes relative).
func Load() (*Vectors, error) {
	root, err := testenv.ModuleRoot()
	if err != nil {
		return nil, fmt.Errorf("conformance: %w", err)
	}
	data, err := os.ReadFile(filepath.Join(root, "internal", "shortcode", "testdata", "vectors.json"))
	if err != nil {
		return nil, err
	}
	var v Vectors
	if err := json.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	if len(v.Valid) == 0 || len(v.Invalid) == 0 {
		return nil, errors.New("conformance: vectors.json has no valid or no invalid vectors")
	}
	return &v, nil
}
