// echo-server is the lab's test workload: it answers every HTTP request with
// the name of the pod (and node) that served it, so that a learner can see
// which backend a Service picked.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log"
	"net/http"
	"os"
	"os/signal"
	"syscall"
	"time"
)

var version = "dev"

func env(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

// get is the image's HTTP client (`echo-server get URL [TIMEOUT_SECONDS]`):
// busybox's wget is statically linked against glibc and cannot resolve names
// or, on some hosts, even connect without NSS libraries in the image.
func get(args []string) int {
	if len(args) < 1 {
		fmt.Fprintln(os.Stderr, "usage: echo-server get URL [TIMEOUT_SECONDS]")
		return 2
	}
	timeout := 5 * time.Second
	if len(args) > 1 {
		if d, err := time.ParseDuration(args[1] + "s"); err == nil {
			timeout = d
		}
	}
	resp, err := (&http.Client{Timeout: timeout}).Get(args[0])
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	os.Stdout.Write(body)
	if resp.StatusCode >= 400 {
		return 1
	}
	return 0
}

func main() {
	if len(os.Args) > 1 && os.Args[1] == "get" {
		os.Exit(get(os.Args[2:]))
	}
	host, _ := os.Hostname()
	pod := env("POD_NAME", host)
	node := env("NODE_NAME", "unknown")
	addr := ":" + env("PORT", "8080")
	mux := http.NewServeMux()
	mux.HandleFunc("/healthz", func(w http.ResponseWriter, _ *http.Request) {
		if _, err := os.Stat("/tmp/unhealthy"); err == nil {
			http.Error(w, "unhealthy (/tmp/unhealthy exists)", http.StatusInternalServerError)
			return
		}
		fmt.Fprintln(w, "ok")
	})
	mux.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		log.Printf("%s %s from %s", r.Method, r.URL.Path, r.RemoteAddr)
		fmt.Fprintf(w, "pod=%s node=%s version=%s\n", pod, node, version)
	})
	log.Printf("echo-server %s: pod %s on node %s listening on %s", version, pod, node, addr)
	srv := &http.Server{Addr: addr, Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	// As PID 1 of its container the server gets no default signal handling: without this, SIGTERM (the kubelet
	// stopping the pod) would be ignored and every deletion would wait out the pod's whole grace period (30 s by
	// default) before the SIGKILL. On SIGTERM it finishes the requests in flight (2 s at most) and exits 0.
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	go func() {
		sig := <-stop
		log.Printf("echo-server: %s, shutting down", sig)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx)
	}()
	if err := srv.ListenAndServe(); !errors.Is(err, http.ErrServerClosed) {
		log.Fatal(err)
	}
}
