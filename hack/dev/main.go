// Command dev runs linkforge on this machine for `make dev`: a local control
// plane, the manager and the redirector, and the samples applied. It prints
// how to use it and stops everything on Ctrl-C.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/linkforge/linkforge/internal/devenv"
)

func main() {
	if err := run(); err != nil {
		fmt.Fprintln(os.Stderr, "dev:", err)
		os.Exit(1)
	}
}

func step(format string, args ...any) {
	fmt.Printf("==> "+format+"\n", args...)
}

func run() error {
	root := flag.String("root", ".", "Repository root.")
	redirectAddr := flag.String("redirect-address", "127.0.0.1:8080", "Address the redirector listens on.")
	managerFlags := flag.String("manager-flags", os.Getenv("MANAGER_FLAGS"),
		"More flags for bin/manager, separated by spaces (a value cannot hold one); default $MANAGER_FLAGS. Later flags win over the ones dev sets.")
	redirectorFlags := flag.String("redirector-flags", os.Getenv("REDIRECTOR_FLAGS"),
		"More flags for bin/redirector, as -manager-flags; default $REDIRECTOR_FLAGS. E.g. \"--country-header=X-Country --client-address-header=X-Real-IP\".")
	events := flag.Bool("events", os.Getenv("EVENTS") != "" && os.Getenv("EVENTS") != "0",
		"Print the redirector's click events: a local receiver gets them (--events-cloudevents-url) and writes each as a line on this console and in .dev/events.log; default on when $EVENTS is set (make dev EVENTS=1).")
	flag.Parse()

	abs, err := filepath.Abs(*root)
	if err != nil {
		return err
	}
	dir := filepath.Join(abs, ".dev")
	bin := filepath.Join(abs, "bin")

	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()

	step("starting the control plane (etcd + kube-apiserver, found or built by make envtest-assets)")
	cp, err := devenv.StartControlPlane(abs, dir)
	if err != nil {
		return err
	}
	var lf *devenv.Linkforge
	defer func() {
		step("stopping")
		if lf != nil {
			if err := lf.Stop(10 * time.Second); err != nil {
				fmt.Fprintln(os.Stderr, err)
			}
		}
		if err := cp.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "stopping the control plane:", err)
		}
		step("stopped; nothing left running")
	}()

	redirectorArgs := strings.Fields(*redirectorFlags)
	if *events {
		log, err := os.Create(filepath.Join(dir, "events.log"))
		if err != nil {
			return err
		}
		defer func() { _ = log.Close() }()
		printer, err := devenv.StartEventPrinter(io.MultiWriter(os.Stdout, log))
		if err != nil {
			return err
		}
		defer func() { _ = printer.Close() }()
		step("click events go to %s and are printed here (and in .dev/events.log)", printer.URL)
		redirectorArgs = append([]string{"--events-cloudevents-url", printer.URL, "--events-flush-interval", "1s"}, redirectorArgs...)
	}
	step("starting bin/manager and bin/redirector (on %s; logs in .dev/)", *redirectAddr)
	if len(redirectorArgs) > 0 || *managerFlags != "" {
		step("with manager flags %q and redirector flags %q", *managerFlags, strings.Join(redirectorArgs, " "))
	}
	waitCtx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	if lf, err = devenv.StartLinkforgeWith(waitCtx, cp, devenv.Kubeconfigs{}, bin, dir, *redirectAddr, strings.Fields(*managerFlags), redirectorArgs); err != nil {
		return err
	}

	kubectl := func(args ...string) (string, error) {
		out, err := cp.KubectlCmd(ctx, args...).CombinedOutput()
		if err != nil {
			return "", fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
		}
		return strings.TrimSpace(string(out)), nil
	}
	step("applying config/samples")
	out, err := kubectl("apply", "-k", filepath.Join(abs, "config", "samples"))
	if err != nil {
		return err
	}
	fmt.Println(out)
	if _, err := kubectl("wait", "--for=condition=Ready", "shortlink/docs", "--timeout=60s"); err != nil {
		return err
	}
	code, err := kubectl("get", "shortlink", "docs", "-o", "jsonpath={.status.code}")
	if err != nil {
		return err
	}
	shortURL := fmt.Sprintf("http://%s/default/%s", *redirectAddr, code)
	// The printed curl line must work before it is printed. HEAD: a GET
	// would be a click (a use, an event).
	if err := devenv.WaitHEAD(waitCtx, shortURL, http.StatusFound); err != nil {
		return err
	}
	table, _ := kubectl("get", "shortlinks")

	fmt.Printf(`
linkforge is running.

  kubeconfig:  %[1]s
  logs:        %[2]s/manager.log, %[2]s/redirector.log

Try:
  export KUBECONFIG=%[1]s
  kubectl get shortlinks
  kubectl describe shortlink docs
  bin/linkforge code -n default https://example.com/hello

%[3]s

A redirect:
curl -i %[4]s

Press Ctrl-C to stop everything.
`, cp.Kubeconfig, dir, table, shortURL)

	select {
	case <-ctx.Done():
		return nil
	case <-lf.Done():
	}
	return errors.New("a component exited; see the logs in .dev/")
}
