// echo-server is the lab's test workload: it answers every HTTP request with
// the name of the pod (and node) that served it, so that a learner can see
// which backend a Service picked.
package main

import (
	"fmt"
	"log"
	"net/http"
	"os"
	"time"
)

var version = "dev"

func env(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}

func main() {
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
	log.Fatal(srv.ListenAndServe())
}
