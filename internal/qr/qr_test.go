package qr

import (
	"bytes"
	"errors"
	"image"
	"image/color"
	"image/png"
	"regexp"
	"strconv"
	"strings"
	"testing"

	"github.com/linkforge/linkforge/internal/qr/qrtest"
)

var urls = []string{
	"http://127.0.0.1:18089/default/78eWabtoV9",
	"https://go.example.com/team-a/LUMLV6n3To",
	"https://go.team-a.example/handbook",
	"https://go.example.com/" + strings.Repeat("n", 63) + "/" + strings.Repeat("c", 64),
}

func TestPNGScansBack(t *testing.T) {
	for _, u := range urls {
		c, err := Encode(u)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []struct{ size, margin int }{{DefaultSize, DefaultMargin}, {MinSize, 1}, {MaxSize, MaxMargin}, {300, 0}} {
			b, err := c.PNG(p.size, p.margin)
			if err != nil {
				t.Fatal(err)
			}
			img, err := png.Decode(bytes.NewReader(b))
			if err != nil {
				t.Fatal(err)
			}
			side := img.Bounds().Dx()
			if want := (c.Modules() + 2*p.margin) * max(1, p.size/(c.Modules()+2*p.margin)); side != want || img.Bounds().Dy() != side {
				t.Errorf("%s size %d margin %d: %dx%d, want %dx%d", u, p.size, p.margin, side, img.Bounds().Dy(), want, want)
			}
			if side > p.size && p.size >= c.Modules()+2*p.margin {
				t.Errorf("%s: %d pixels wide, asked for at most %d", u, side, p.size)
			}
			if p.margin == 0 || side < 100 {
				continue // a scanner needs the quiet zone and a few pixels a module
			}
			if got := qrtest.Scan(t, img); got != u {
				t.Errorf("size %d margin %d: scans as %q, want %q", p.size, p.margin, got, u)
			}
		}
	}
}

// svgModules reads the dark modules back from the SVG's path.
func svgModules(t *testing.T, svg []byte) (side int, dark map[[2]int]bool) {
	t.Helper()
	m := regexp.MustCompile(`viewBox="0 0 (\d+) (\d+)"`).FindSubmatch(svg)
	if m == nil {
		t.Fatalf("no viewBox in %s", svg)
	}
	side, _ = strconv.Atoi(string(m[1]))
	dark = map[[2]int]bool{}
	for _, r := range regexp.MustCompile(`M(\d+) (\d+)h(\d+)v1h-(\d+)z`).FindAllSubmatch(svg, -1) {
		x, _ := strconv.Atoi(string(r[1]))
		y, _ := strconv.Atoi(string(r[2]))
		n, _ := strconv.Atoi(string(r[3]))
		if back, _ := strconv.Atoi(string(r[4])); back != n {
			t.Fatalf("run %s does not close", r[0])
		}
		for i := range n {
			dark[[2]int{x + i, y}] = true
		}
	}
	return side, dark
}

func TestSVGScansBack(t *testing.T) {
	for _, u := range urls {
		c, err := Encode(u)
		if err != nil {
			t.Fatal(err)
		}
		svg, err := c.SVG(512, DefaultMargin)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(svg, []byte(`width="512" height="512"`)) {
			t.Errorf("not 512 pixels wide: %.120s", svg)
		}
		side, dark := svgModules(t, svg)
		if side != c.Modules()+2*DefaultMargin {
			t.Fatalf("viewBox %d, want %d", side, c.Modules()+2*DefaultMargin)
		}
		// Rasterize the path at 8 pixels a module, and scan it.
		const px = 8
		img := image.NewGray(image.Rect(0, 0, side*px, side*px))
		for i := range img.Pix {
			img.Pix[i] = 255
		}
		for m := range dark {
			for y := m[1] * px; y < (m[1]+1)*px; y++ {
				for x := m[0] * px; x < (m[0]+1)*px; x++ {
					img.SetGray(x, y, color.Gray{})
				}
			}
		}
		if got := qrtest.Scan(t, img); got != u {
			t.Errorf("SVG scans as %q, want %q", got, u)
		}
	}
}

func TestTerminalDrawsEveryModule(t *testing.T) {
	c, err := Encode(urls[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, invert := range []bool{false, true} {
		text := c.Terminal(2, invert)
		lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
		side := c.Modules() + 4
		if len(lines) != (side+1)/2 {
			t.Fatalf("%d lines, want %d", len(lines), (side+1)/2)
		}
		for row, line := range lines {
			cells := []rune(line)
			if len(cells) != side {
				t.Fatalf("line %d has %d cells, want %d", row, len(cells), side)
			}
			for col, r := range cells {
				top := r == '█' || r == '▀'
				bottom := r == '█' || r == '▄'
				x, y := col-2, 2*row-2
				if want := c.Dark(x, y) == invert; top != want {
					t.Fatalf("invert=%v: module (%d,%d) drawn lit=%v, want %v", invert, x, y, top, want)
				}
				if y+1 < c.Modules()+2 {
					if want := c.Dark(x, y+1) == invert; bottom != want {
						t.Fatalf("invert=%v: module (%d,%d) drawn lit=%v, want %v", invert, x, y+1, bottom, want)
					}
				}
			}
		}
	}
}

func TestBounds(t *testing.T) {
	c, err := Encode(urls[0])
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []struct{ size, margin int }{{MinSize - 1, 4}, {MaxSize + 1, 4}, {256, -1}, {256, MaxMargin + 1}} {
		if _, err := c.PNG(p.size, p.margin); err == nil {
			t.Errorf("PNG(%d, %d) drawn", p.size, p.margin)
		}
		if _, err := c.SVG(p.size, p.margin); err == nil {
			t.Errorf("SVG(%d, %d) drawn", p.size, p.margin)
		}
	}
	if err := CheckSize(0, 4); err == nil || !strings.Contains(err.Error(), "size must be a number of pixels from 64 to 1024") {
		t.Errorf("CheckSize(0, 4) = %v", err)
	}
}

func TestDeterministic(t *testing.T) {
	a, _ := Encode(urls[1])
	b, _ := Encode(urls[1])
	pa, _ := a.PNG(DefaultSize, DefaultMargin)
	pb, _ := b.PNG(DefaultSize, DefaultMargin)
	sa, _ := a.SVG(DefaultSize, DefaultMargin)
	sb, _ := b.SVG(DefaultSize, DefaultMargin)
	if !bytes.Equal(pa, pb) || !bytes.Equal(sa, sb) {
		t.Error("one URL drawn twice gives two images")
	}
}

func TestBucket(t *testing.T) {
	for size, want := range map[int]int{MinSize: 64, 127: 64, 128: 128, 255: 128, DefaultSize: 256, 300: 256, 511: 256, 512: 512, 1023: 512, MaxSize: 1024, 0: 64} {
		if got := Bucket(size); got != want {
			t.Errorf("Bucket(%d) = %d, want %d", size, got, want)
		}
	}
	if Bucket(DefaultSize) != DefaultSize {
		t.Error("the default size is not a bucket: every default request would be scaled")
	}
}

// A text too long says so, without quoting it (the caller logs what it needs).
func TestEncodeTooLong(t *testing.T) {
	long := "https://go.example.com/" + strings.Repeat("x", 3000)
	_, err := Encode(long)
	if !errors.Is(err, ErrTooLong) || strings.Contains(err.Error(), "xxxx") {
		t.Errorf("Encode(3,023 bytes) = %v, want ErrTooLong without the text", err)
	}
}
