// Command otelcol is a minimal OpenTelemetry Collector for linkforge's
// tests: the OTLP receiver and the debug and file exporters, built from the
// Go module proxy (no release binary is fetched). It is a module of its own
// so that the collector's dependencies stay out of linkforge's go.mod.
//
//	go build -o ../../bin/otelcol . && ../../bin/otelcol --config config.yaml
package main

import (
	"fmt"
	"os"

	"github.com/open-telemetry/opentelemetry-collector-contrib/exporter/fileexporter"
	"go.opentelemetry.io/collector/component"
	"go.opentelemetry.io/collector/confmap"
	"go.opentelemetry.io/collector/confmap/provider/envprovider"
	"go.opentelemetry.io/collector/confmap/provider/fileprovider"
	"go.opentelemetry.io/collector/confmap/provider/yamlprovider"
	"go.opentelemetry.io/collector/exporter"
	"go.opentelemetry.io/collector/exporter/debugexporter"
	"go.opentelemetry.io/collector/otelcol"
	"go.opentelemetry.io/collector/receiver"
	"go.opentelemetry.io/collector/receiver/otlpreceiver"
	"go.opentelemetry.io/collector/service/telemetry/otelconftelemetry"
)

func factories() (otelcol.Factories, error) {
	receivers, err := otelcol.MakeFactoryMap[receiver.Factory](otlpreceiver.NewFactory())
	if err != nil {
		return otelcol.Factories{}, err
	}
	exporters, err := otelcol.MakeFactoryMap[exporter.Factory](debugexporter.NewFactory(), fileexporter.NewFactory())
	if err != nil {
		return otelcol.Factories{}, err
	}
	return otelcol.Factories{Receivers: receivers, Exporters: exporters, Telemetry: otelconftelemetry.NewFactory()}, nil
}

func main() {
	cmd := otelcol.NewCommand(otelcol.CollectorSettings{
		BuildInfo: component.BuildInfo{Command: "otelcol", Description: "linkforge's test collector", Version: "dev"},
		Factories: factories,
		ConfigProviderSettings: otelcol.ConfigProviderSettings{ResolverSettings: confmap.ResolverSettings{
			ProviderFactories: []confmap.ProviderFactory{fileprovider.NewFactory(), envprovider.NewFactory(), yamlprovider.NewFactory()},
		}},
	})
	if err := cmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}
