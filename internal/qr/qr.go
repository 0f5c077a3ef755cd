// Package qr draws QR codes of short URLs as PNG, SVG or terminal text, for
// the redirector's /qr route and the kubectl plugin's qr verb, which both
// call it so that they draw the same code. The encoding (error correction,
// masking, version) is github.com/boombuler/barcode's: a dependency-free,
// widely used encoder (Gitea's TOTP codes, pquerna/otp), not ours. This
// package only lays its modules out: a quiet zone, whole pixels per module.
package qr

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"strconv"
	"strings"
	"sync"

	"github.com/boombuler/barcode/qr"
)

// Bounds of the drawing parameters. Size is the width (and height) of the
// image in pixels; margin is the quiet zone around the code in modules
// (the standard asks for 4).
const (
	MinSize       = 64
	MaxSize       = 1024
	DefaultSize   = 256
	MinMargin     = 0
	MaxMargin     = 16
	DefaultMargin = 4
)

// SizeBuckets are the sizes a server draws (Bucket), smallest first: a
// client that may ask for any size in MinSize..MaxSize gets one of five
// drawings per code and margin, so a cache of drawings holds few of them.
var SizeBuckets = [...]int{64, 128, 256, 512, 1024}

// Bucket is the size bucket of a size: the largest of SizeBuckets not
// larger than size (MinSize for a smaller one), so the image is never
// wider than asked, as PNG promises.
func Bucket(size int) int {
	b := SizeBuckets[0]
	for _, s := range SizeBuckets {
		if s <= size {
			b = s
		}
	}
	return b
}

// ErrTooLong is the error of Encode for a text longer than the largest QR
// code holds (about 2,300 bytes of a URL at level M).
var ErrTooLong = errors.New("too long for a QR code")

// Code is an encoded QR code: n x n modules.
type Code struct {
	text string
	n    int
	dark []bool // row-major
}

// Encode encodes text (a URL) with error correction level M (15% of the
// code may be lost), the usual level for printed URLs.
func Encode(text string) (*Code, error) {
	b, err := qr.Encode(text, qr.M, qr.Auto)
	if err != nil {
		// Auto falls back to byte mode, which encodes any text: its only
		// failure is a text too long. The text is the caller's to quote.
		return nil, fmt.Errorf("%d bytes: %w", len(text), ErrTooLong)
	}
	n := b.Bounds().Dx()
	c := &Code{text: text, n: n, dark: make([]bool, n*n)}
	for y := range n {
		for x := range n {
			r, _, _, _ := b.At(x, y).RGBA()
			c.dark[y*n+x] = r < 0x8000
		}
	}
	return c, nil
}

// Text is what the code encodes.
func (c *Code) Text() string { return c.text }

// Modules is the width of the code in modules, without a quiet zone.
func (c *Code) Modules() int { return c.n }

// Dark reports whether the module at column x, row y is dark. Outside the
// code (in the quiet zone) it is light.
func (c *Code) Dark(x, y int) bool {
	return x >= 0 && y >= 0 && x < c.n && y < c.n && c.dark[y*c.n+x]
}

// CheckSize returns an error that says the bounds for a size or margin out
// of them.
func CheckSize(size, margin int) error {
	if size < MinSize || size > MaxSize {
		return fmt.Errorf("size must be a number of pixels from %d to %d, got %d", MinSize, MaxSize, size)
	}
	if margin < MinMargin || margin > MaxMargin {
		return fmt.Errorf("margin must be a number of modules from %d to %d, got %d", MinMargin, MaxMargin, margin)
	}
	return nil
}

// scale is the whole number of pixels per module that fits size with margin
// modules on each side; at least 1, so a code too large for size is drawn
// larger than size rather than unreadable.
func (c *Code) scale(size, margin int) int {
	return max(1, size/(c.n+2*margin))
}

// PNG draws the code as a black and white PNG (one bit per pixel) as wide
// as size, or a little less: the largest whole number of pixels per module
// that fits, so that modules stay sharp. It writes the PNG itself (a 1-bit
// grayscale image, filter None): image/png packs such an image pixel by
// pixel, 5 ms for the largest size, where each row here is packed once per
// module row and the rows of a module are copies.
func (c *Code) PNG(size, margin int) ([]byte, error) {
	if err := CheckSize(size, margin); err != nil {
		return nil, err
	}
	scale := c.scale(size, margin)
	side := (c.n + 2*margin) * scale
	stride := 1 + (side+7)/8 // the filter byte, then the pixels
	raw := make([]byte, stride*side)
	for y := -margin; y < c.n+margin; y++ {
		row := raw[(y+margin)*scale*stride:][:stride]
		for px := range side {
			// A set bit is white (grayscale 1); dark modules stay 0.
			if x := px/scale - margin; !c.Dark(x, y) {
				row[1+px/8] |= 0x80 >> (px % 8)
			}
		}
		for i := 1; i < scale; i++ {
			copy(raw[((y+margin)*scale+i)*stride:][:stride], row)
		}
	}
	var idat bytes.Buffer
	zw := zlibWriters.Get().(*zlib.Writer)
	defer zlibWriters.Put(zw)
	zw.Reset(&idat)
	if _, err := zw.Write(raw); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	var b bytes.Buffer
	b.WriteString("\x89PNG\r\n\x1a\n")
	var ihdr [13]byte
	binary.BigEndian.PutUint32(ihdr[0:], uint32(side))
	binary.BigEndian.PutUint32(ihdr[4:], uint32(side))
	ihdr[8], ihdr[9] = 1, 0 // bit depth 1, grayscale; compression, filter and interlace 0
	pngChunk(&b, "IHDR", ihdr[:])
	pngChunk(&b, "IDAT", idat.Bytes())
	pngChunk(&b, "IEND", nil)
	return b.Bytes(), nil
}

// zlibWriters keep deflate's state (most of a megabyte) between drawings.
var zlibWriters = sync.Pool{New: func() any { return zlib.NewWriter(nil) }}

// pngChunk writes a PNG chunk: length, type, data, CRC of type and data.
func pngChunk(b *bytes.Buffer, typ string, data []byte) {
	var n [4]byte
	binary.BigEndian.PutUint32(n[:], uint32(len(data)))
	b.Write(n[:])
	crc := crc32.NewIEEE()
	_, _ = crc.Write([]byte(typ))
	_, _ = crc.Write(data)
	b.WriteString(typ)
	b.Write(data)
	binary.BigEndian.PutUint32(n[:], crc.Sum32())
	b.Write(n[:])
}

// SVG draws the code as an SVG image size pixels wide: a white square and
// one path of the dark modules, row by row, in module units.
func (c *Code) SVG(size, margin int) ([]byte, error) {
	if err := CheckSize(size, margin); err != nil {
		return nil, err
	}
	side := c.n + 2*margin
	var b bytes.Buffer
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" shape-rendering="crispEdges">`,
		size, size, side, side)
	fmt.Fprintf(&b, `<rect width="%d" height="%d" fill="#fff"/><path fill="#000" d="`, side, side)
	for y := range c.n {
		for x := 0; x < c.n; {
			if !c.dark[y*c.n+x] {
				x++
				continue
			}
			run := 1
			for x+run < c.n && c.dark[y*c.n+x+run] {
				run++
			}
			b.WriteString("M" + strconv.Itoa(x+margin) + " " + strconv.Itoa(y+margin) + "h" + strconv.Itoa(run) + "v1h-" + strconv.Itoa(run) + "z")
			x += run
		}
	}
	b.WriteString(`"/></svg>` + "\n")
	return b.Bytes(), nil
}

// Terminal draws the code as text, two rows of modules per line with the
// Unicode half blocks. Light modules are drawn as blocks and dark ones as
// spaces, which scans on a terminal with a dark background; invert for a
// light one.
func (c *Code) Terminal(margin int, invert bool) string {
	if margin < MinMargin || margin > MaxMargin {
		margin = DefaultMargin
	}
	lit := func(x, y int) bool { return c.Dark(x, y) == invert }
	var b strings.Builder
	for y := -margin; y < c.n+margin; y += 2 {
		for x := -margin; x < c.n+margin; x++ {
			top, bottom := lit(x, y), y+1 < c.n+margin && lit(x, y+1)
			switch {
			case top && bottom:
				b.WriteString("█")
			case top:
				b.WriteString("▀")
			case bottom:
				b.WriteString("▄")
			default:
				b.WriteByte(' ')
			}
		}
		b.WriteByte('\n')
	}
	return b.String()
}
