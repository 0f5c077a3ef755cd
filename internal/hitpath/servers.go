package hitpath

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
)

// The configuration of hack/callgrind-bench and of the budget test: the
// budget is recorded for it. Each phase gives every connection a whole
// number of 65 reads: the redirector's read yield peeks at a connection's
// socket once every 65 reads on it (internal/redirect/readyield.go), so
// every phase then holds as many peeks however its reads line up with
// that cycle (they do not line up the same after a phase measured again).
const (
	BenchLinks      = 256
	BenchNamespaces = 8
	BenchConns      = 8
	BenchShort      = 8 * 65
	BenchLong       = 2 * BenchShort
)

// RedirectorArgs are hack/redirector-bench's arguments for links links over
// BenchNamespaces namespaces, and more.
func RedirectorArgs(links int, more ...string) []string {
	return append([]string{"--links=" + strconv.Itoa(links), "--namespaces=" + strconv.Itoa(BenchNamespaces)}, more...)
}

// Redirector is hack/redirector-bench (binary bin) serving links synthetic
// links on addr, its probes on probe, counting uses or not.
func Redirector(bin string, links int, addr, probe string, countUses bool) Server {
	name := "redirector"
	if !countUses {
		name = "nocount"
	}
	return Server{
		Name: name,
		Command: append([]string{bin}, RedirectorArgs(links, "--bind-address="+addr,
			"--health-probe-bind-address="+probe, "--count-uses="+strconv.FormatBool(countUses))...),
		Env:     GoEnv,
		Addr:    addr,
		Symbols: bin,
		Timers:  true,
	}
}

// RedirectorOf is hack/redirector-bench serving links synthetic links of
// a kind (its --link-kind: plain, or rules: 8 rules and 3 variants each),
// counting uses, under name.
func RedirectorOf(bin, name, kind string, links int, addr, probe string) Server {
	s := Redirector(bin, links, addr, probe, true)
	s.Name = name
	s.Command = append(s.Command, "--link-kind="+kind)
	return s
}

// EventsBatch is the click events' batch of RedirectorEventsSent: with no
// flush tick in a measurement (an hour), the batcher sends full batches
// only, and every phase (a multiple of 65 requests) sends the same number
// of them whatever the warm-up left in the ring.
const EventsBatch = 65

// RedirectorEvents is Redirector counting uses, with click events on, as
// the hit path pays for them: each answer builds its record and offers it,
// but no batch fills during a measurement (a batch of 100,000, a hand-off
// ring of 65,536 records, no flush tick), so the batcher and the sink stay
// asleep. Its instructions per request are the events' cost on the
// request path.
func RedirectorEvents(bin string, links int, addr, probe, sinkURL string) Server {
	s := Redirector(bin, links, addr, probe, true)
	s.Name = "events"
	s.Command = append(s.Command, "--events-cloudevents-url="+sinkURL,
		"--events-buffer=100000", "--events-max-batch=100000", "--events-handoff-buffer=65536", "--events-flush-interval=1h")
	return s
}

// RedirectorEventsSent is RedirectorEvents with the events sent: a
// CloudEvents batch of EventsBatch events to sinkURL (a receiver not under
// callgrind) every EventsBatch requests. Its instructions per request are
// the whole cost of events: the record on the request path, and the
// batcher's and the sink's work (building, encoding and sending them).
func RedirectorEventsSent(bin string, links int, addr, probe, sinkURL string) Server {
	s := Redirector(bin, links, addr, probe, true)
	s.Name = "events-sent"
	s.Command = append(s.Command, "--events-cloudevents-url="+sinkURL,
		"--events-max-batch="+strconv.Itoa(EventsBatch), "--events-flush-interval=1h")
	return s
}

// Floor is hack/fasthttp-floor (binary bin) serving the links of table on addr.
func Floor(bin, table, addr string) Server {
	return Server{Name: "floor", Command: []string{bin, "--bind-address=" + addr, "--table=" + table},
		Env: GoEnv, Addr: addr, Symbols: bin, Timers: true}
}

// Nginx is nginx answering `return 302` from a map of the links, configured
// as in hack/bench-redirect.sh (one process, no access log, unlimited
// keep-alive requests), its files in dir. It installs Debian's nginx with
// apt-get if there is none.
func Nginx(links []Link, dir, addr string) (Server, error) {
	bin, err := exec.LookPath("nginx")
	if err != nil {
		if _, err := os.Stat("/usr/sbin/nginx"); err == nil {
			bin = "/usr/sbin/nginx"
		} else {
			if err := Install("nginx"); err != nil {
				return Server{}, err
			}
			bin = "/usr/sbin/nginx"
		}
	}
	ndir := filepath.Join(dir, "nginx")
	if err := os.MkdirAll(ndir, 0o755); err != nil {
		return Server{}, err
	}
	f, err := os.Create(filepath.Join(ndir, "map.conf"))
	if err != nil {
		return Server{}, err
	}
	w := bufio.NewWriter(f)
	_, _ = fmt.Fprintln(w, "map $uri $target {\n    default \"\";")
	for _, l := range links {
		_, _ = fmt.Fprintf(w, "    /%s/%s \"%s\";\n", l.Namespace, l.Code, l.URL)
	}
	_, _ = fmt.Fprintln(w, "}") // a write error shows in Flush
	if err := w.Flush(); err != nil {
		return Server{}, err
	}
	if err := f.Close(); err != nil {
		return Server{}, err
	}
	conf := filepath.Join(ndir, "nginx.conf")
	err = os.WriteFile(conf, []byte(`daemon off;
master_process off;
worker_processes 1;
pid `+ndir+`/nginx.pid;
error_log `+ndir+`/error.log warn;
events { worker_connections 4096; }
http {
    access_log off;
    server_tokens off;
    keepalive_requests 100000000;
    keepalive_timeout 120s;
    map_hash_max_size 262144;
    map_hash_bucket_size 256;
    client_body_temp_path `+ndir+`;
    proxy_temp_path `+ndir+`;
    fastcgi_temp_path `+ndir+`;
    uwsgi_temp_path `+ndir+`;
    scgi_temp_path `+ndir+`;
    include `+ndir+`/map.conf;
    server {
        listen `+addr+` backlog=4096;
        location / {
            if ($target = "") { return 404; }
            return 302 $target;
        }
    }
}
`), 0o644)
	if err != nil {
		return Server{}, err
	}
	// No timers, but a new second's first event formats nginx's cached
	// time strings (ngx_time_update).
	return Server{Name: "nginx", Command: []string{bin, "-c", conf, "-p", ndir}, Addr: addr, Seconds: true}, nil
}

// Install installs Debian packages with apt-get (as root).
func Install(pkgs ...string) error {
	cmd := exec.Command("apt-get", "update", "-qq")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get update: %v: %s", err, out)
	}
	cmd = exec.Command("apt-get", append([]string{"install", "-y", "-qq"}, pkgs...)...)
	cmd.Env = append(os.Environ(), "DEBIAN_FRONTEND=noninteractive")
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("apt-get install %v: %v: %s", pkgs, err, out)
	}
	return nil
}
