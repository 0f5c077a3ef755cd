// Not a module to build: the files build.sh lays over copies of Traefik's
// and cert-manager's dependencies (README.md). This go.mod only keeps them
// out of hack/gateway's packages, whose imports they could not satisfy.
module overlay

go 1.26.7
