package main

import (
	"context"
	"crypto/tls"
	"errors"
	"io"
	"net"
	"net/http"
	"os/signal"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// The reference answer is the Node bare-webhook's (bench/bare-webhook.ts): an
// allowed review with a fixed uid, so the client does the same work against
// either and only the server differs.
var bareAnswer = []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","response":{"uid":"705ab4f5-6393-11e8-b7cc-42010a800002","allowed":true}}`)

func runBare(args []string) {
	fs := newFlags("bare-webhook")
	port := fs.Int("port", 0, "port to listen on at 127.0.0.1")
	tlsDir := fs.String("tls-dir", "", "directory with tls.crt and tls.key")
	fs.Parse(args)
	if *port <= 0 || *tlsDir == "" {
		fatalf("bare-webhook: --port and --tls-dir are required")
	}
	cert, err := tls.LoadX509KeyPair(filepath.Join(*tlsDir, "tls.crt"), filepath.Join(*tlsDir, "tls.key"))
	if err != nil {
		fatalf("bare-webhook: --tls-dir %s: %v (it needs tls.crt and tls.key, e.g. a gateway's --tls-dir)", *tlsDir, err)
	}
	srv := &http.Server{
		Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			n, _ := io.Copy(io.Discard, r.Body)
			status := http.StatusOK
			if n == 0 {
				status = http.StatusBadRequest
			}
			h := w.Header()
			h.Set("Content-Type", "application/json")
			h.Set("Content-Length", strconv.Itoa(len(bareAnswer)))
			w.WriteHeader(status)
			w.Write(bareAnswer)
		}),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{cert}},
		// HTTP/1.1 only, like node:https in the Node reference.
		TLSNextProto: map[string]func(*http.Server, *tls.Conn, http.Handler){},
		IdleTimeout:  60 * time.Second,
	}
	ln, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(*port)))
	if err != nil {
		fatalf("bare-webhook: %v (pick a free --port)", err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	say("listening")
	if err := srv.ServeTLS(ln, "", ""); err != nil && !errors.Is(err, http.ErrServerClosed) {
		fatalf("bare-webhook: %v", err)
	}
}
