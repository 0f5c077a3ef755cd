// Package venafi stands in for cert-manager's Venafi CertificateRequest
// controller in linkforge's test build (hack/gateway): the Venafi SDK
// (github.com/Venafi/vcert/v5) is not served by the Go module proxy. Only
// the controller's name is kept, which cert-manager's configuration
// defaults list; the controller itself is not built or registered.
package venafi

// CRControllerName is the name cert-manager gives the controller.
const CRControllerName = "certificaterequests-issuer-venafi"
