// nodeutil: the one small static binary behind the local real node
// (scripts/cluster/realnode.sh). Standard library only.
//
//	nodeutil pause                 the pod sandbox process (image oversell.local/pause)
//	nodeutil apicheck [-timeout 60s] [-path /version]
//	                               in a pod: GET the API server through the `kubernetes`
//	                               Service (KUBERNETES_SERVICE_HOST/PORT, the pod's service
//	                               account token and CA), print the answer and the pod's
//	                               cgroups, exit 0 on HTTP 200 (image oversell.local/probe)
//	nodeutil sleep <seconds>       sleep (a container that just stays up)
//	nodeutil serve <addr>          HTTP server answering "ok <hostname>" (a Service backend)
//	nodeutil httpget [-timeout 60s] <url>
//	                               GET until HTTP 200 (e.g. a Service's ClusterIP), print the body
//	nodeutil forward <listen> <target>
//	                               on the host: TCP forwarder (pods reach the API server,
//	                               which listens on 127.0.0.1 only, at the bridge address)
//	nodeutil burn [-threads 1]     spin that many threads forever: with a CPU limit the
//	                               pod uses exactly its limit (the CFS quota throttles it)
//	nodeutil hold -mib N [-step-mib 64]
//	                               allocate N MiB, touching every page, report progress,
//	                               then hold it until killed (a known working set)
package main

import (
	"crypto/tls"
	"crypto/x509"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime"
	"strconv"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: nodeutil pause|apicheck|sleep|serve|httpget|forward|burn|hold ...")
		os.Exit(2)
	}
	switch os.Args[1] {
	case "pause":
		pause()
	case "apicheck":
		os.Exit(apicheck(os.Args[2:]))
	case "sleep":
		s, err := strconv.ParseFloat(argOr(os.Args, 2, "3600"), 64)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(2)
		}
		time.Sleep(time.Duration(s * float64(time.Second)))
	case "serve":
		serve(argOr(os.Args, 2, ":8080"))
	case "httpget":
		os.Exit(httpget(os.Args[2:]))
	case "forward":
		if len(os.Args) != 4 {
			fmt.Fprintln(os.Stderr, "usage: nodeutil forward <listen host:port> <target host:port>")
			os.Exit(2)
		}
		forward(os.Args[2], os.Args[3])
	case "burn":
		os.Exit(burn(os.Args[2:]))
	case "hold":
		os.Exit(hold(os.Args[2:]))
	default:
		fmt.Fprintf(os.Stderr, "nodeutil: unknown command %q\n", os.Args[1])
		os.Exit(2)
	}
}

func argOr(a []string, i int, def string) string {
	if len(a) > i {
		return a[i]
	}
	return def
}

// pause: PID 1 of the pod sandbox. Reaps zombies, exits on SIGINT/SIGTERM.
func pause() {
	sig := make(chan os.Signal, 8)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sig {
		if s == syscall.SIGCHLD {
			for {
				var ws syscall.WaitStatus
				pid, err := syscall.Wait4(-1, &ws, syscall.WNOHANG, nil)
				if pid <= 0 || err != nil {
					break
				}
			}
			continue
		}
		os.Exit(0)
	}
}

const saDir = "/var/run/secrets/kubernetes.io/serviceaccount"

func apicheck(args []string) int {
	fs := flag.NewFlagSet("apicheck", flag.ContinueOnError)
	timeout := fs.Duration("timeout", 60*time.Second, "keep trying this long")
	path := fs.String("path", "/version", "API path to GET")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	host, port := os.Getenv("KUBERNETES_SERVICE_HOST"), os.Getenv("KUBERNETES_SERVICE_PORT")
	if host == "" || port == "" {
		fmt.Fprintln(os.Stderr, "KUBERNETES_SERVICE_HOST/PORT not set")
		return 1
	}
	token, err := os.ReadFile(saDir + "/token")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	caPEM, err := os.ReadFile(saDir + "/ca.crt")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(caPEM) {
		fmt.Fprintln(os.Stderr, "no certificate in ca.crt")
		return 1
	}
	// Verified TLS: the API server's certificate must name the Service's ClusterIP.
	client := &http.Client{Timeout: 5 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool}}}
	url := "https://" + net.JoinHostPort(host, port) + *path
	if !getUntilOK(client, url, "Bearer "+string(token), *timeout) {
		return 1
	}
	if cg, err := os.ReadFile("/proc/self/cgroup"); err == nil {
		fmt.Printf("cgroup:\n%s", cg)
	}
	return 0
}

// getUntilOK GETs url every 500 ms until HTTP 200 or the timeout, printing
// every answer (status and body) and every error.
func getUntilOK(client *http.Client, url, authorization string, timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for attempt := 1; ; attempt++ {
		req, _ := http.NewRequest(http.MethodGet, url, nil)
		if authorization != "" {
			req.Header.Set("Authorization", authorization)
		}
		resp, err := client.Do(req)
		if err == nil {
			body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
			resp.Body.Close()
			fmt.Printf("GET %s -> %d (attempt %d)\n%s\n", url, resp.StatusCode, attempt, body)
			if resp.StatusCode == http.StatusOK {
				return true
			}
		} else {
			fmt.Fprintf(os.Stderr, "GET %s: %v (attempt %d)\n", url, err, attempt)
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(500 * time.Millisecond)
	}
}

func forward(listen, target string) {
	ln, err := net.Listen("tcp", listen)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("forwarding %s -> %s\n", listen, target)
	go func() { waitForSignal(); os.Exit(0) }()
	for {
		c, err := ln.Accept()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		go func(c net.Conn) {
			defer c.Close()
			u, err := net.DialTimeout("tcp", target, 5*time.Second)
			if err != nil {
				fmt.Fprintln(os.Stderr, err)
				return
			}
			defer u.Close()
			done := make(chan struct{}, 2)
			go func() { io.Copy(u, c); u.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
			go func() { io.Copy(c, u); c.(*net.TCPConn).CloseWrite(); done <- struct{}{} }()
			<-done
			<-done
		}(c)
	}
}

func serve(addr string) {
	host, _ := os.Hostname()
	http.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "ok %s\n", host)
	})
	go func() { waitForSignal(); os.Exit(0) }()
	fmt.Printf("serving on %s\n", addr)
	if err := http.ListenAndServe(addr, nil); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
}

func httpget(args []string) int {
	fs := flag.NewFlagSet("httpget", flag.ContinueOnError)
	timeout := fs.Duration("timeout", 60*time.Second, "keep trying this long")
	if err := fs.Parse(args); err != nil || fs.NArg() != 1 {
		fmt.Fprintln(os.Stderr, "usage: nodeutil httpget [-timeout 60s] <url>")
		return 2
	}
	if !getUntilOK(&http.Client{Timeout: 5 * time.Second}, fs.Arg(0), "", *timeout) {
		return 1
	}
	return 0
}

// nowMs is the wall clock in Unix milliseconds: pods and the host share it,
// so a test can compare a pod's report with what it observed.
func nowMs() int64 { return time.Now().UnixMilli() }

func burn(args []string) int {
	fs := flag.NewFlagSet("burn", flag.ContinueOnError)
	threads := fs.Int("threads", 1, "busy threads")
	if err := fs.Parse(args); err != nil || *threads < 1 {
		return 2
	}
	runtime.GOMAXPROCS(*threads + 1)
	for i := 0; i < *threads; i++ {
		go func() {
			x := uint64(1)
			for {
				x = x*6364136223846793005 + 1442695040888963407
			}
		}()
	}
	fmt.Printf("burning %d threads since %d\n", *threads, nowMs())
	waitForSignal()
	return 0
}

// hold keeps N MiB resident: every page written (the kernel counts a page in
// the working set only once it is touched), in chunks so progress shows.
func hold(args []string) int {
	fs := flag.NewFlagSet("hold", flag.ContinueOnError)
	mib := fs.Int("mib", 0, "MiB to hold")
	step := fs.Int("step-mib", 64, "MiB per progress line")
	if err := fs.Parse(args); err != nil || *mib <= 0 || *step <= 0 {
		fmt.Fprintln(os.Stderr, "usage: nodeutil hold -mib N [-step-mib 64]")
		return 2
	}
	const page = 4096
	start := nowMs()
	chunks := make([][]byte, 0, *mib / *step + 1)
	for held := 0; held < *mib; {
		n := min(*step, *mib-held)
		c := make([]byte, n<<20)
		for i := 0; i < len(c); i += page {
			c[i] = 1
		}
		chunks = append(chunks, c)
		held += n
		fmt.Printf("held %d MiB at %d\n", held, nowMs())
	}
	fmt.Printf("holding %d MiB since %d (started %d)\n", *mib, nowMs(), start)
	waitForSignal()
	runtime.KeepAlive(chunks)
	return 0
}

func waitForSignal() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, syscall.SIGINT, syscall.SIGTERM)
	<-sig
}
