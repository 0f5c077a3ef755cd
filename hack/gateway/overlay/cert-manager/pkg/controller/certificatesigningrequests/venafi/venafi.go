// Package venafi stands in for cert-manager's Venafi CertificateSigningRequest
// controller in linkforge's test build (hack/gateway): the Venafi SDK
// (github.com/Venafi/vcert/v5) is not served by the Go module proxy. Only
// the controller's name is kept, which cert-manager's configuration
// defaults list; the controller itself is not built or registered.
package venafi

// CSRControllerName is the name cert-manager gives the controller.
const CSRControllerName = "certificatesigningrequests-issuer-venafi"
