package events

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
)

// TestRequestBodiesRelease: a request's bodies read the buffer until
// released, then nothing (not even one the transport asks for after).
func TestRequestBodiesRelease(t *testing.T) {
	buf := []byte("0123456789")
	bodies := &requestBodies{b: buf}
	req := httptest.NewRequest(http.MethodPost, "http://receiver/", nil)
	bodies.setOn(req)
	if req.ContentLength != 10 || req.GetBody == nil {
		t.Fatalf("ContentLength %d, GetBody %v", req.ContentLength, req.GetBody != nil)
	}
	p := make([]byte, 4)
	if n, err := req.Body.Read(p); n != 4 || err != nil || string(p) != "0123" {
		t.Fatalf("read %d %q %v", n, p[:n], err)
	}
	again, _ := req.GetBody()
	if b, err := io.ReadAll(again); err != nil || string(b) != "0123456789" {
		t.Fatalf("GetBody read %q, %v; want it all", b, err)
	}
	bodies.release()
	later, _ := req.GetBody()
	for _, body := range []io.Reader{req.Body, later} {
		if n, err := body.Read(p); n != 0 || !errors.Is(err, errBodyReleased) {
			t.Errorf("released body read %d, %v; want errBodyReleased", n, err)
		}
	}
}
