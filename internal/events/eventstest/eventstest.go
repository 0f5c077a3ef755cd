// Package eventstest has what the tests of click events share: reading what
// a sink sent with the CloudEvents SDK's own HTTP reader, the receiver we
// did not write.
package eventstest

import (
	"bytes"
	"io"
	"net/http"

	cloudevents "github.com/cloudevents/sdk-go/v2"
	cehttp "github.com/cloudevents/sdk-go/v2/protocol/http"
)

// ReadCloudEvents reads req's events, a batch or a single event in either
// mode, with the SDK's HTTP reader. It returns the body too, for tests that
// check the bytes (a signature).
func ReadCloudEvents(req *http.Request) (body []byte, events []cloudevents.Event, err error) {
	if body, err = io.ReadAll(req.Body); err != nil {
		return nil, nil, err
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	if cehttp.IsHTTPBatch(req.Header) {
		events, err = cehttp.NewEventsFromHTTPRequest(req)
		return body, events, err
	}
	e, err := cehttp.NewEventFromHTTPRequest(req)
	if err != nil {
		return body, nil, err
	}
	return body, []cloudevents.Event{*e}, nil
}
