package e2e

import (
	"crypto/tls"
	"encoding/json"
	"io"
	"net/http"
	"testing"
	"time"

	. "github.com/onsi/gomega"
)

// insecureTLS calls the manager's metrics port, whose certificate is self-signed.
var insecureTLS = &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
	TLSClientConfig: &tls.Config{InsecureSkipVerify: true},
}}

// getMetricsPort sends GET path to the manager's metrics port with token
// (none: anonymous) and returns the status and body.
func (e *env) getMetricsPort(path, token string) (int, string, error) {
	req, err := http.NewRequest(http.MethodGet, "https://"+e.mgrMetrics+path, nil)
	if err != nil {
		return 0, "", err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := insecureTLS.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer func() { _ = resp.Body.Close() }()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b), err
}

// reaperStats reads the reaper's summary as an authorized caller.
func (e *env) reaperStats() (totalReaped int, err error) {
	status, body, err := e.getMetricsPort("/reaper", e.scraperToken)
	if err != nil {
		return 0, err
	}
	if status != http.StatusOK {
		return 0, &httpError{status, body}
	}
	var stats struct {
		TotalReaped int `json:"totalReaped"`
	}
	err = json.Unmarshal([]byte(body), &stats)
	return stats.TotalReaped, err
}

type httpError struct {
	status int
	body   string
}

func (h *httpError) Error() string { return http.StatusText(h.status) + ": " + h.body }

// testProbePortPolicy: the probe port answers the kubelet without
// authentication and serves nothing else; /metrics and /reaper need a caller
// the API server authenticates and authorizes (ClusterRole linkforge-metrics-reader).
func (e *env) testProbePortPolicy(t *testing.T) {
	g, e := newG(t), e.in(t)
	stranger := e.serviceAccountToken("stranger", "")

	for _, path := range []string{"/healthz", "/readyz"} {
		status, err := e.getPlain(e.mgrProbes + path)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).To(Equal(http.StatusOK), "%s on the probe port, unauthenticated", path)
	}
	status, err := e.getPlain(e.mgrProbes + "/reaper")
	g.Expect(err).NotTo(HaveOccurred())
	g.Expect(status).To(Equal(http.StatusNotFound), "/reaper is not on the probe port")

	for _, path := range []string{"/metrics", "/reaper"} {
		status, _, err := e.getMetricsPort(path, "")
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).To(Equal(http.StatusUnauthorized), "%s without a token", path)
		status, _, err = e.getMetricsPort(path, stranger)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).To(Equal(http.StatusForbidden), "%s with a token not bound to linkforge-metrics-reader", path)
		status, body, err := e.getMetricsPort(path, e.scraperToken)
		g.Expect(err).NotTo(HaveOccurred())
		g.Expect(status).To(Equal(http.StatusOK), "%s as a linkforge-metrics-reader: %s", path, body)
	}
}

// getPlain returns the status of GET http://addrPath.
func (e *env) getPlain(addrPath string) (int, error) {
	resp, err := http.Get("http://" + addrPath)
	if err != nil {
		return 0, err
	}
	defer func() { _ = resp.Body.Close() }()
	_, err = io.Copy(io.Discard, resp.Body)
	return resp.StatusCode, err
}
