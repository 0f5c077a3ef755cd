// Package qrtest reads QR codes back in tests, with ZXing's decoder (its Go
// port), which shares no code with the encoder the redirector uses.
package qrtest

import (
	"bytes"
	"image"
	"image/png"
	"testing"

	"github.com/makiuchi-d/gozxing"
	zxqr "github.com/makiuchi-d/gozxing/qrcode"
)

// Scan returns the text of the QR code that fills img, failing t if there
// is none.
func Scan(t testing.TB, img image.Image) string {
	t.Helper()
	bmp, err := gozxing.NewBinaryBitmapFromImage(img)
	if err != nil {
		t.Fatal(err)
	}
	res, err := zxqr.NewQRCodeReader().Decode(bmp, map[gozxing.DecodeHintType]any{gozxing.DecodeHintType_PURE_BARCODE: true})
	if err != nil {
		t.Fatalf("not a QR code: %v", err)
	}
	return res.GetText()
}

// ScanPNG is Scan of a PNG file's bytes.
func ScanPNG(t testing.TB, b []byte) string {
	t.Helper()
	img, err := png.Decode(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	return Scan(t, img)
}
